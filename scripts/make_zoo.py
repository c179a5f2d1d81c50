#!/usr/bin/env python3
"""Export a broad zoo of real ONNX models for coverage testing of onnx-memplan (kept OUT of the repo).

    python3 -m venv /work/venv-torch
    /work/venv-torch/bin/pip install torch torchvision transformers onnx onnxruntime onnxscript \
        onnxsim onnxslim
    /work/venv-torch/bin/python scripts/make_zoo.py /work/zoo            # everything (~25 min, ~2 GB)
    /work/venv-torch/bin/python scripts/make_zoo.py /work/zoo --only 'bert*' 'resnet18*'
    /work/venv-torch/bin/python scripts/make_zoo.py /work/zoo --no-large  # skip the big vision models

Then: python scripts/ort_check.py --bin BIN --models /work/zoo --manifest /work/zoo/manifest.json \
          --out /tmp/zoo-check --allow-unsupported

Sources (random weights, fixed seeds; nothing is downloaded from any hub):
  * torchvision classification / segmentation / detection / video architectures at full size;
  * transformers encoders and decoders with small random configs (eager attention unless noted);
  * timm architectures (one per family) at their default input size (needs `pip install timm`);
  * a few hand-written models for LSTM/GRU and If/Loop control flow.
Exporters: the legacy TorchScript exporter (dynamo=False) at opsets 11..20, the dynamo exporter
(dynamo=True) for some, one of them with external data. Derived variants: onnxruntime-optimized
models (ORT_ENABLE_BASIC, ORT_ENABLE_EXTENDED via SessionOptions.optimized_model_filepath; the
extended ones contain com.microsoft fused ops), and onnxsim / onnxslim simplified models if those
packages import.

Every written model is checked with onnx.checker (full_check; the result is recorded, a failure does
not drop the model) and run once in onnxruntime with the manifest's bindings (a model that does not
run is dropped and listed under "skipped" with the reason).

manifest.json: {"versions": {...}, "models": [{"file", "name", "family", "source", "exporter",
"variant", "opset", "ir_version", "bytes", "external_data", "symbolic_dims", "bindings",
"inputs": [{"name", "dtype", "shape"}], "outputs", "nodes", "op_types", "checker"}],
"skipped": [{"name", "reason"}]}.
"bindings" maps every symbolic dim of the inputs to the value to plan/run with ("batch"-like -> 1,
others -> 16 unless the model needs something else); pass them as --dim NAME=N.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
import time
import traceback
import warnings

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ort_check  # noqa: E402  (feeds and bindings exactly as the conformance check makes them)

warnings.filterwarnings("ignore")
if hasattr(torch.backends, "mha"):
    torch.backends.mha.set_fastpath_enabled(False)  # no aten::_native_multi_head_attention

LARGE = {"vit_b_16", "swin_t", "convnext_tiny", "fcn_resnet50", "resnet50", "inception_v3", "r3d_18",
         "densenet121"}


# ----------------------------------------------------------------------------------------------
# model specs: name -> builder() returning (module, args tuple, input_names, output_names, dyn)
# ----------------------------------------------------------------------------------------------
class FirstOut(nn.Module):
    """Plain tensor outputs for modules that return dicts / ModelOutputs / tuples."""

    def __init__(self, m, key=None, kw=None, extra=None):
        super().__init__()
        self.m, self.key, self.kw, self.extra = m, key, kw, extra or {}

    def forward(self, *args):
        if self.kw:
            o = self.m(**dict(zip(self.kw, args)), **self.extra)
        else:
            o = self.m(*args, **self.extra)
        if isinstance(o, dict) and self.key in o:
            return o[self.key]
        if hasattr(o, "last_hidden_state"):
            return o.last_hidden_state
        if isinstance(o, (tuple, list)):
            return o[0]
        return o


def tv(name, size=224, dyn_batch=False, seg=False, **kw):
    def build():
        import torchvision
        torch.manual_seed(0)
        extra = dict(kw)
        if seg:
            extra.setdefault("weights_backbone", None)
        m = torchvision.models.get_model(name, weights=None, **extra).eval()
        if seg:
            m = FirstOut(m, key="out")
        x = torch.randn(1, 3, size, size)
        dyn = {"input": {0: "batch"}, "output": {0: "batch"}} if dyn_batch else None
        return m, (x,), ["input"], ["output"], dyn
    return build


def timm_model(name):
    """timm architecture with random weights at its default input size."""
    def build():
        import timm
        torch.manual_seed(0)
        m = timm.create_model(name, pretrained=False).eval()
        size = m.pretrained_cfg.get("input_size", (3, 224, 224))
        return m, (torch.randn(1, *size),), ["input"], ["output"], None
    return build


def tv_video():
    import torchvision
    torch.manual_seed(0)
    m = torchvision.models.video.r3d_18(weights=None).eval()
    return m, (torch.randn(1, 3, 8, 112, 112),), ["clip"], ["output"], None


class DetWrap(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        o = self.m(list(x))[0]
        return o["boxes"], o["scores"], o["labels"]


def tv_ssdlite(score_thresh=None):
    """SSDlite with random weights. Its classification head starts with equal scores (0.1 for each
    of 10 classes), so every anchor passes the default 0.001 threshold and the detections are at
    their bound; with `score_thresh`, the head is drawn again (normal, std 0.3) so the scores
    spread and only a few detections pass (13 of the 300 at 0.5): sizes below the bounds."""
    def build():
        import torchvision
        torch.manual_seed(0)
        kw = {} if score_thresh is None else {"score_thresh": score_thresh}
        m = torchvision.models.detection.ssdlite320_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=10, **kw).eval()
        if score_thresh is not None:
            for p in m.head.classification_head.parameters():
                nn.init.normal_(p, std=0.3)
        return DetWrap(m), (torch.rand(1, 3, 320, 320),), ["images"], ["boxes", "scores", "labels"], None
    return build


def tv_retinanet(kind):
    """A torchvision one-stage detector (`retinanet_resnet50_fpn` or `fcos_resnet50_fpn`, the
    RetinaNet-style heads) with random weights and 10 classes, at 320×320: its per-level TopK
    and the batched NonMaxSuppression give data-dependent sizes."""
    def build():
        import torchvision
        torch.manual_seed(0)
        m = getattr(torchvision.models.detection, kind)(
            weights=None, weights_backbone=None, num_classes=10, min_size=320,
            max_size=320).eval()
        return DetWrap(m), (torch.rand(1, 3, 320, 320),), ["images"], ["boxes", "scores", "labels"], None
    return build


TOKENS = ("batch", "sequence")


def hf(kind, n_inputs=2, vocab=1000, extra=None, attn="eager", **cfg):
    """transformers model with a small random config; text inputs [batch, sequence]."""
    def build():
        import transformers
        torch.manual_seed(0)
        cfg_cls = getattr(transformers, kind + "Config")
        model_cls = getattr(transformers, kind + "Model") if kind != "T5" else transformers.T5EncoderModel
        c = cfg_cls(**cfg)
        try:
            c._attn_implementation = attn
        except Exception:
            pass
        m = model_cls(c).eval()
        try:
            m.set_attn_implementation(attn)
        except Exception:
            pass
        names = ["input_ids", "attention_mask", "token_type_ids"][:n_inputs]
        b, s = 2, 16
        ids = torch.randint(0, min(vocab, 100), (b, s))
        mask = torch.ones(b, s, dtype=torch.int64)
        mask[1, 12:] = 0
        args = (ids, mask, torch.zeros(b, s, dtype=torch.int64))[:n_inputs]
        dyn = {n: {0: "batch", 1: "sequence"} for n in names}
        dyn["last_hidden_state"] = {0: "batch", 1: "sequence"}
        return (FirstOut(m, kw=names, extra=extra or {}), args, names, ["last_hidden_state"], dyn)
    return build


def hf_tensor(kind, shape, input_name="pixel_values", **cfg):
    """transformers vision/audio model with a small random config; one float input of `shape`
    with a dynamic batch."""
    def build():
        import transformers
        torch.manual_seed(0)
        c = getattr(transformers, kind + "Config")(**cfg)
        c._attn_implementation = "eager"
        m = getattr(transformers, kind + "Model")(c).eval()
        dyn = {input_name: {0: "batch"}, "last_hidden_state": {0: "batch"}}
        return (FirstOut(m, kw=[input_name]), (torch.randn(*shape),), [input_name],
                ["last_hidden_state"], dyn)
    return build


def hf_vit():
    import transformers
    torch.manual_seed(0)
    c = transformers.ViTConfig(image_size=32, patch_size=4, hidden_size=64, num_hidden_layers=2,
                               num_attention_heads=4, intermediate_size=128)
    c._attn_implementation = "eager"
    m = transformers.ViTModel(c, add_pooling_layer=False).eval()
    return (FirstOut(m, kw=["pixel_values"]), (torch.randn(2, 3, 32, 32),), ["pixel_values"],
            ["last_hidden_state"], {"pixel_values": {0: "batch"}, "last_hidden_state": {0: "batch"}})


def hf_whisper_encoder():
    import transformers
    torch.manual_seed(0)
    c = transformers.WhisperConfig(d_model=64, encoder_layers=2, decoder_layers=1,
                                   encoder_attention_heads=4, decoder_attention_heads=4,
                                   encoder_ffn_dim=128, decoder_ffn_dim=128, num_mel_bins=80,
                                   max_source_positions=64, max_target_positions=32, vocab_size=500,
                                   pad_token_id=1, bos_token_id=2, eos_token_id=2,
                                   decoder_start_token_id=2)
    c._attn_implementation = "eager"
    m = transformers.WhisperModel(c).eval().get_encoder()
    return (FirstOut(m, kw=["input_features"]), (torch.randn(2, 80, 128),), ["input_features"],
            ["last_hidden_state"], {"input_features": {0: "batch"}, "last_hidden_state": {0: "batch"}})


class LstmTagger(nn.Module):
    def __init__(self, vocab=500, emb=64, hidden=96, tags=12, cell="lstm"):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(emb, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tags)

    def forward(self, tokens):
        y, _ = self.rnn(self.emb(tokens))
        return torch.log_softmax(self.out(y), dim=-1)


def rnn_model(cell):
    def build():
        torch.manual_seed(0)
        m = LstmTagger(cell=cell).eval()
        x = torch.randint(0, 100, (2, 16))
        return (m, (x,), ["tokens"], ["tags"],
                {"tokens": {0: "batch", 1: "sequence"}, "tags": {0: "batch", 1: "sequence"}})
    return build


class LoopIf(nn.Module):
    """Scripted control flow: Loop with a data-dependent trip count and an If inside."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(32, 32)
        self.norm = nn.LayerNorm(32)

    def forward(self, x: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        h = x
        for i in range(int(steps.item())):
            if bool(h.mean() > 0):
                h = torch.relu(self.lin(h)) + h
            else:
                h = self.norm(h) * 0.5
        return torch.tanh(h)


def control_flow():
    torch.manual_seed(0)
    m = torch.jit.script(LoopIf().eval())
    return (m, (torch.randn(4, 32), torch.tensor(3)), ["x", "steps"], ["y"],
            {"x": {0: "batch"}, "y": {0: "batch"}})


class DataDependent(nn.Module):
    """Data-dependent output shapes: NonZero, TopK with k from the input, dynamic Slice."""

    def forward(self, x):
        s = torch.sigmoid(x)
        idx = torch.nonzero(s > 0.5)
        v, i = torch.topk(s.flatten(), 8)
        n = idx.shape[0]
        return idx.float().sum(0) / (n + 1), v * 2, i


def data_dependent():
    return DataDependent(), (torch.randn(4, 16),), ["x"], ["mean_idx", "top", "top_idx"], None


# name, builder, opset, exporter, large?
SPECS = []


def spec(name, build, opset, exporter="torchscript", family=None, source="torchvision", **kw):
    SPECS.append(dict(name=name, build=build, opset=opset, exporter=exporter,
                      family=family or name.split("_op")[0], source=source, **kw))


# torchvision, classification
spec("resnet18_op11", tv("resnet18"), 11, family="resnet18")
spec("resnet18_op13", tv("resnet18", dyn_batch=True), 13, family="resnet18")
spec("resnet18_op17", tv("resnet18"), 17, family="resnet18")
spec("resnet18_op20", tv("resnet18", dyn_batch=True), 20, family="resnet18")
spec("resnet18_dynamo_op18", tv("resnet18", dyn_batch=True), 18, "dynamo", family="resnet18")
spec("resnet18_dynamo_extdata_op18", tv("resnet18"), 18, "dynamo", family="resnet18", external=True)
spec("resnet50_op17", tv("resnet50", dyn_batch=True), 17, family="resnet50")
spec("mobilenet_v3_small_op13", tv("mobilenet_v3_small"), 13)
spec("mobilenet_v3_large_op18", tv("mobilenet_v3_large", dyn_batch=True), 18)
spec("mobilenet_v3_large_dynamo_op18", tv("mobilenet_v3_large"), 18, "dynamo",
     family="mobilenet_v3_large")
spec("efficientnet_b0_op17", tv("efficientnet_b0"), 17)
spec("densenet121_op13", tv("densenet121"), 13)
spec("squeezenet1_1_op11", tv("squeezenet1_1"), 11)
spec("shufflenet_v2_x1_0_op13", tv("shufflenet_v2_x1_0", dyn_batch=True), 13)
spec("regnet_y_400mf_op17", tv("regnet_y_400mf"), 17)
spec("mnasnet0_5_op11", tv("mnasnet0_5"), 11)
spec("convnext_tiny_op17", tv("convnext_tiny"), 17)
spec("vit_b_16_op18", tv("vit_b_16"), 18)
spec("swin_t_op17", tv("swin_t"), 17)
spec("googlenet_op13", tv("googlenet", aux_logits=False, init_weights=True), 13)
spec("inception_v3_op17", tv("inception_v3", size=299, aux_logits=False, init_weights=True), 17)
# torchvision, segmentation / detection / video
spec("deeplabv3_mobilenet_v3_large_op13",
     tv("deeplabv3_mobilenet_v3_large", size=256, seg=True, aux_loss=False), 13)
spec("lraspp_mobilenet_v3_large_op17", tv("lraspp_mobilenet_v3_large", size=256, seg=True), 17)
spec("fcn_resnet50_op11", tv("fcn_resnet50", size=256, seg=True, aux_loss=False), 11)
spec("ssdlite320_mobilenet_v3_large_op13", tv_ssdlite(), 13)
spec("ssdlite320_mobilenet_v3_large_thresh_op13", tv_ssdlite(score_thresh=0.5), 13,
     family="ssdlite320_mobilenet_v3_large")
# No score reaches 1.0: no detection at all, the post-processing's empty branch at run time.
spec("ssdlite320_mobilenet_v3_large_nodet_op13", tv_ssdlite(score_thresh=1.0), 13,
     family="ssdlite320_mobilenet_v3_large")
spec("retinanet_resnet50_fpn_op13", tv_retinanet("retinanet_resnet50_fpn"), 13)
spec("fcos_resnet50_fpn_op13", tv_retinanet("fcos_resnet50_fpn"), 13)
spec("r3d_18_op13", tv_video, 13)
# transformers
BERT = dict(vocab_size=1000, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=512, max_position_embeddings=128)
spec("bert_op14", hf("Bert", 3, **BERT), 14, source="transformers", family="bert")
spec("bert_op17", hf("Bert", 3, **BERT), 17, source="transformers", family="bert")
spec("bert_sdpa_op17", hf("Bert", 3, attn="sdpa", **BERT), 17, source="transformers",
     family="bert")
spec("bert_dynamo_op18", hf("Bert", 3, **BERT), 18, "dynamo", source="transformers", family="bert")
spec("bert_dynamo_op20", hf("Bert", 3, **BERT), 20, "dynamo", source="transformers", family="bert")
spec("distilbert_op14", hf("DistilBert", 2, vocab_size=1000, dim=128, n_layers=2, n_heads=4,
                           hidden_dim=256, max_position_embeddings=128), 14, source="transformers")
spec("roberta_op17", hf("Roberta", 2, **BERT), 17, source="transformers")
spec("gpt2_op14", hf("GPT2", 2, vocab_size=1000, n_embd=128, n_layer=2, n_head=4, n_positions=128,
                     extra={"use_cache": False}), 14, source="transformers", family="gpt2")
spec("gpt2_dynamo_op18", hf("GPT2", 2, vocab_size=1000, n_embd=128, n_layer=2, n_head=4,
                            n_positions=128, extra={"use_cache": False}), 18, "dynamo",
     source="transformers", family="gpt2")
spec("t5_encoder_op17", hf("T5", 2, vocab_size=1000, d_model=128, d_kv=32, d_ff=256, num_layers=2,
                           num_heads=4), 17, source="transformers")
spec("llama_op17", hf("Llama", 2, vocab_size=1000, hidden_size=128, intermediate_size=256,
                      num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=128, extra={"use_cache": False}),
     17, source="transformers")
spec("llama_dynamo_op20", hf("Llama", 2, vocab_size=1000, hidden_size=128, intermediate_size=256,
                              num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                              max_position_embeddings=128, extra={"use_cache": False}),
     20, "dynamo", source="transformers", family="llama")
spec("vit_hf_op18", hf_vit, 18, source="transformers")
SMALL = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
             intermediate_size=128)
DECODER = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=128)
NO_CACHE = {"use_cache": False}
for _kind, _cfg, _extra in [
        ("Albert", dict(SMALL, embedding_size=32), None),
        ("Electra", dict(SMALL, embedding_size=32), None),
        ("DebertaV2", SMALL, None),
        ("MobileBert", dict(SMALL, intermediate_size=64, embedding_size=32,
                            intra_bottleneck_size=32, true_hidden_size=32), None),
        ("XLMRoberta", SMALL, None),
        ("MPNet", SMALL, None),
        ("GPTNeoX", DECODER, NO_CACHE),
        ("Qwen2", dict(DECODER, num_key_value_heads=2), NO_CACHE),
        ("Mistral", dict(DECODER, num_key_value_heads=2), NO_CACHE),
        ("OPT", dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     ffn_dim=128, word_embed_proj_dim=64), NO_CACHE),
        ("Bart", dict(vocab_size=1000, d_model=64, encoder_layers=1, decoder_layers=1,
                      encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                      decoder_ffn_dim=128), NO_CACHE)]:
    spec(f"{_kind.lower()}_op17", hf(_kind, 2, extra=_extra, **_cfg), 17, source="transformers")
IMAGE = (1, 3, 64, 64)
for _kind, _cfg in [
        ("ConvNext", dict(hidden_sizes=[16, 32, 64, 128], depths=[1, 1, 1, 1])),
        ("Swin", dict(image_size=64, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                      window_size=4)),
        ("Segformer", dict(num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1],
                           hidden_sizes=[16, 32], num_attention_heads=[1, 2])),
        ("Dinov2", dict(image_size=64, patch_size=8, hidden_size=64, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=128)),
        ("ResNet", dict(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])),
        ("MobileViT", dict(image_size=64, hidden_sizes=[32, 48, 64],
                           neck_hidden_sizes=[8, 16, 24, 32, 48, 64, 128])),
        ("CLIPVision", dict(image_size=64, patch_size=8, hidden_size=64, num_hidden_layers=2,
                            num_attention_heads=4, intermediate_size=128))]:
    spec(f"{_kind.lower()}_hf_op17", hf_tensor(_kind, IMAGE, **_cfg), 17, source="transformers")
spec("wav2vec2_op17", hf_tensor("Wav2Vec2", (1, 1600), "input_values", vocab_size=32,
                                hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                intermediate_size=128, conv_dim=(32, 32), conv_stride=(5, 2),
                                conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                                num_conv_pos_embedding_groups=4), 17, source="transformers")
spec("whisper_encoder_op17", hf_whisper_encoder, 17, source="transformers")
# timm (one per family: CNNs, mobile nets, vision transformers and hybrids)
TIMM = ["tf_efficientnet_b0", "mobilenetv3_large_100", "convnext_atto", "resnet18d",
        "regnetx_002", "mixnet_s", "ghostnet_100", "levit_128s", "deit_tiny_patch16_224",
        "mobilevit_xxs", "poolformer_s12", "dla34", "rexnet_100", "lcnet_050",
        "edgenext_xx_small", "tinynet_a", "fastvit_t8", "repvgg_a0", "resnest14d", "nfnet_l0",
        "crossvit_tiny_240", "pit_ti_224", "cait_xxs24_224", "efficientvit_b0", "mobileone_s0",
        "hgnetv2_b0", "ese_vovnet19b_dw", "efficientformer_l1", "coat_lite_tiny", "gcvit_xxtiny"]
for _name in TIMM:
    spec(f"timm_{_name}_op17", timm_model(_name), 17, source="timm", family=_name)
# hand-written
spec("lstm_tagger_op13", rnn_model("lstm"), 13, source="custom")
spec("gru_tagger_op14", rnn_model("gru"), 14, source="custom")
spec("control_flow_op13", control_flow, 13, source="custom")
spec("data_dependent_op13", data_dependent, 13, source="custom")

# derived variants: base name -> list of variant kinds
ORT_VARIANTS = ["resnet18_op17", "mobilenet_v3_large_op18", "efficientnet_b0_op17", "bert_op17",
                "gpt2_op14", "distilbert_op14", "vit_hf_op18", "convnext_tiny_op17",
                "t5_encoder_op17", "qwen2_op17", "debertav2_op17", "swin_hf_op17",
                "segformer_hf_op17", "wav2vec2_op17"]
SIM_VARIANTS = ["resnet18_op13", "mobilenet_v3_small_op13", "bert_op14", "gpt2_op14",
                "swin_t_op17", "t5_encoder_op17", "llama_op17"]


# ----------------------------------------------------------------------------------------------
DIM_MAX = {"sequence": 128}


def export(sp, path):
    m, args, inames, onames, dyn = sp["build"]()
    with torch.no_grad():
        if sp["exporter"] == "dynamo":
            shapes = None
            if dyn:  # named torch.export Dims, one object per dim name so equal dims stay tied
                dims = {}
                for n in inames:
                    for ax, dn in dyn.get(n, {}).items():
                        dims.setdefault(dn, torch.export.Dim(dn, min=1, max=DIM_MAX.get(dn, 4096)))
                shapes = tuple({ax: dims[dn] for ax, dn in dyn.get(n, {}).items()} or None
                               for n in inames)
                if isinstance(m, FirstOut):  # forward(*args)
                    shapes = (shapes,)
            torch.onnx.export(m, args, path, dynamo=True, opset_version=sp["opset"],
                              input_names=inames, output_names=onames, dynamic_shapes=shapes,
                              external_data=bool(sp.get("external")), verbose=False)
        else:
            torch.onnx.export(m, args, path, dynamo=False, opset_version=sp["opset"],
                              input_names=inames, output_names=onames, dynamic_axes=dyn,
                              do_constant_folding=True)


def describe(path, out_dir, extra):
    import onnx
    model = onnx.load(path, load_external_data=False)
    dims = ort_check.symbolic_dims(model)
    bindings = {d: ort_check.default_binding(d) for d in dims}
    bindings.update(extra.get("bindings", {}))

    def vi_json(v):
        tt = v.type.tensor_type
        return {"name": v.name, "dtype": ort_check.onnx_elem_to_name(tt.elem_type),
                "shape": [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                          for d in tt.shape.dim]}

    ext = sorted({e.value for t in model.graph.initializer if t.data_location == 1
                  for e in t.external_data if e.key == "location"})
    ops = sorted({(n.domain + "::" if n.domain else "") + n.op_type for n in model.graph.node})
    entry = {
        "file": os.path.relpath(path, out_dir),
        "ir_version": model.ir_version,
        "opset": {o.domain or "": o.version for o in model.opset_import},
        "bytes": os.path.getsize(path) + sum(os.path.getsize(os.path.join(os.path.dirname(path), e))
                                             for e in ext),
        "external_data": ext,
        "symbolic_dims": dims,
        "bindings": bindings,
        "inputs": [vi_json(v) for v in ort_check.graph_inputs(model)],
        "outputs": [vi_json(v) for v in model.graph.output],
        "nodes": len(model.graph.node),
        "op_types": ops,
    }
    entry.update({k: v for k, v in extra.items() if k != "bindings"})
    return entry


def verify(path, entry):
    """checker result (recorded) and one onnxruntime run (raises if it does not run)."""
    import onnx
    try:
        onnx.checker.check_model(path, full_check=True)
        entry["checker"] = "ok"
    except Exception as e:
        entry["checker"] = str(e).strip().splitlines()[0][:300]
    model = onnx.load(path)
    shapes, _ = ort_check.input_shapes(model, entry["bindings"])
    feeds = ort_check.make_feeds(model, shapes, 0)
    so_threads = max(1, os.cpu_count() or 1)
    outs = ort_check.run(path, feeds, so_threads)
    entry["ort_output_shapes"] = {k: list(v.shape) for k, v in outs.items()
                                  if isinstance(v, np.ndarray)}


def ort_optimized(src, dst, level):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.optimized_model_filepath = dst
    so.log_severity_level = 3
    ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])


def simplified(src, dst, tool):
    import onnx
    if tool == "onnxsim":
        import onnxsim
        m, ok = onnxsim.simplify(onnx.load(src))
        if not ok:
            raise RuntimeError("onnxsim could not validate the simplified model")
        onnx.save(m, dst)
    else:
        import onnxslim
        onnxslim.slim(src, dst)


def versions():
    import importlib
    v = {"python": sys.version.split()[0]}
    for p in ("torch", "torchvision", "transformers", "onnx", "onnxruntime", "onnxscript",
              "onnxsim", "onnxslim", "numpy"):
        try:
            v[p] = importlib.import_module(p).__version__
        except Exception:
            v[p] = None
    return v


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", nargs="?", default="/work/zoo", help="output directory (not the repo)")
    ap.add_argument("--only", nargs="*", help="glob patterns on model names (variants follow)")
    ap.add_argument("--no-large", action="store_true", help="skip the big torchvision models")
    ap.add_argument("--no-variants", action="store_true", help="no ORT-optimized / simplified copies")
    a = ap.parse_args()
    out = os.path.abspath(a.out)
    repo = os.path.abspath(os.path.join(HERE, ".."))
    if out == repo or out.startswith(repo + os.sep):
        print(f"refusing to write the zoo inside the repository ({out})", file=sys.stderr)
        return 2
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    man_path = os.path.join(out, "manifest.json")
    manifest = {"versions": versions(), "models": [], "skipped": []}
    if a.only and os.path.exists(man_path):  # partial run: keep the other entries
        old = json.load(open(man_path))
        manifest["models"] = old.get("models", [])
        manifest["skipped"] = old.get("skipped", [])

    def selected(name):
        if a.no_large and name.split("_op")[0] in LARGE:
            return False
        return not a.only or any(fnmatch.fnmatch(name, p) for p in a.only)

    def record(entry=None, skip=None):
        names = {entry["name"]} if entry else {skip["name"]}
        manifest["models"] = [m for m in manifest["models"] if m["name"] not in names]
        manifest["skipped"] = [s for s in manifest["skipped"] if s["name"] not in names]
        if entry:
            manifest["models"].append(entry)
        else:
            manifest["skipped"].append(skip)
        manifest["models"].sort(key=lambda m: m["name"])
        with open(man_path, "w") as f:
            json.dump(manifest, f, indent=1)

    def remove(path):
        for p in [path] + [os.path.join(os.path.dirname(path), f) for f in os.listdir(out)
                           if f.startswith(os.path.basename(path)[:-5] + ".") and f.endswith(".data")]:
            if os.path.exists(p):
                os.remove(p)

    def finish(name, path, extra, t0):
        try:
            entry = describe(path, out, dict(extra, name=name))
            verify(path, entry)
            record(entry)
            print(f"ok   {name}: {entry['nodes']} nodes, {entry['bytes'] / 1e6:.1f} MB, "
                  f"dims {entry['bindings'] or '-'}, checker {entry['checker'][:60]} "
                  f"({time.time() - t0:.1f}s)", flush=True)
            return True
        except Exception as e:
            remove(path)
            reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
            record(skip={"name": name, "reason": "does not run in onnxruntime: " + reason})
            print(f"SKIP {name}: {reason}", flush=True)
            return False

    built = set()
    for sp in SPECS:
        name = sp["name"]
        if not selected(name):
            continue
        path = os.path.join(out, name + ".onnx")
        t0 = time.time()
        try:
            export(sp, path)
        except Exception as e:
            remove(path)
            msg = str(e).strip().splitlines()
            reason = f"{type(e).__name__}: {msg[0][:300] if msg else ''}"
            record(skip={"name": name, "reason": "export failed: " + reason})
            print(f"SKIP {name}: export failed: {reason}", flush=True)
            if os.environ.get("ZOO_DEBUG"):
                traceback.print_exc()
            continue
        extra = {"family": sp["family"], "source": sp["source"], "exporter": sp["exporter"],
                 "variant": "base"}
        if finish(name, path, extra, t0):
            built.add(name)

    if a.no_variants:
        return 0
    import onnxruntime as ort
    levels = [("ort_basic", ort.GraphOptimizationLevel.ORT_ENABLE_BASIC),
              ("ort_extended", ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED)]
    for base in ORT_VARIANTS:
        if base not in built:
            continue
        src = os.path.join(out, base + ".onnx")
        fam = next(s["family"] for s in SPECS if s["name"] == base)
        for tag, level in levels:
            name = f"{base}.{tag}"
            dst = os.path.join(out, name + ".onnx")
            t0 = time.time()
            try:
                ort_optimized(src, dst, level)
            except Exception as e:
                record(skip={"name": name, "reason": f"onnxruntime optimization failed: {e}"[:300]})
                print(f"SKIP {name}: {e}", flush=True)
                continue
            finish(name, dst, {"family": fam, "source": "onnxruntime", "exporter": tag,
                               "variant": tag, "base": base + ".onnx"}, t0)
    for base in SIM_VARIANTS:
        if base not in built:
            continue
        src = os.path.join(out, base + ".onnx")
        fam = next(s["family"] for s in SPECS if s["name"] == base)
        for tool in ("onnxsim", "onnxslim"):
            name = f"{base}.{tool}"
            dst = os.path.join(out, name + ".onnx")
            t0 = time.time()
            try:
                simplified(src, dst, tool)
            except Exception as e:
                msg = str(e).strip().splitlines()
                reason = f"{type(e).__name__}: {msg[0][:300] if msg else ''}"
                record(skip={"name": name, "reason": f"{tool} failed: {reason}"})
                print(f"SKIP {name}: {tool}: {reason}", flush=True)
                continue
            finish(name, dst, {"family": fam, "source": tool, "exporter": tool, "variant": tool,
                               "base": base + ".onnx"}, t0)
    print(f"{len(manifest['models'])} models, {len(manifest['skipped'])} skipped -> {man_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
