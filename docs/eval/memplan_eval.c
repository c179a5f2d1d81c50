/* Evaluate an onnx-memplan table planned over ranges at one size (docs/format.md, "Plans over
 * ranges"). The expression evaluator is memplan_eval(); main() shows a runtime's use of it on
 * a flat listing of the table (what a runtime would keep of it):
 *
 *   line 1:  ALIGNMENT NAME=VALUE [NAME=VALUE ...]
 *   then:    INDEX|BYTES_EXPR|OFFSET_EXPR     one line per arena tensor (INDEX: its $k)
 *   last:    arena|ARENA_EXPR
 *
 * and prints `INDEX OFFSET BYTES` per tensor, then `arena BYTES`.
 *
 *   cc -O2 -o memplan_eval memplan_eval.c && ./memplan_eval < listing.txt
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>

typedef long long i64;

struct ctx {
    const char *s;                       /* the text, advanced while parsing */
    const char **names; const i64 *values; int n;  /* the symbols' values */
    i64 (*end)(int k, void *user); void *user;     /* `$k`: the end of tensor k's buffer */
    int error;
};

static void skip(struct ctx *c) { while (isspace((unsigned char)*c->s)) c->s++; }
static int eat(struct ctx *c, const char *t) {
    skip(c);
    if (strncmp(c->s, t, strlen(t)) == 0) { c->s += strlen(t); return 1; }
    return 0;
}
static i64 floordiv(i64 a, i64 b) { i64 q = a / b; return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q; }
static i64 sum(struct ctx *c);

static i64 factor(struct ctx *c) {
    skip(c);
    if (eat(c, "(")) { i64 v = sum(c); if (!eat(c, ")")) c->error = 1; return v; }
    if (eat(c, "$")) { int k = (int)strtol(c->s, (char **)&c->s, 10); return c->end(k, c->user); }
    if (isdigit((unsigned char)*c->s)) return strtoll(c->s, (char **)&c->s, 10);
    const char *start = c->s;
    while (isalnum((unsigned char)*c->s) || *c->s == '_') c->s++;
    size_t len = (size_t)(c->s - start);
    if (len == 3 && strncmp(start, "max", 3) == 0 && eat(c, "(")) {
        i64 v = sum(c);
        while (eat(c, ",")) { i64 w = sum(c); if (w > v) v = w; }
        if (!eat(c, ")")) c->error = 1;
        return v;
    }
    for (int i = 0; i < c->n; i++)
        if (strlen(c->names[i]) == len && strncmp(c->names[i], start, len) == 0) return c->values[i];
    c->error = 1;
    return 0;
}

static i64 product(struct ctx *c) {
    i64 v = factor(c);
    for (;;) {
        if (eat(c, "//")) { i64 d = factor(c); if (d <= 0) { c->error = 1; return 0; } v = floordiv(v, d); }
        else if (eat(c, "*")) v *= factor(c);
        else return v;
    }
}

static i64 sum(struct ctx *c) {
    i64 v = eat(c, "-") ? -product(c) : product(c);
    for (;;) {
        if (eat(c, "+")) v += product(c);
        else if (eat(c, "-")) v -= product(c);
        else return v;
    }
}

/* The value of `text` with the symbols `names[i] = values[i]` and `$k` given by `end`;
 * sets *ok to 0 on a malformed expression or an unknown symbol. */
i64 memplan_eval(const char *text, const char **names, const i64 *values, int n,
                 i64 (*end)(int k, void *user), void *user, int *ok) {
    struct ctx c = { text, names, values, n, end, user, 0 };
    i64 v = sum(&c);
    skip(&c);
    *ok = !c.error && *c.s == '\0';
    return v;
}

/* ---- a runtime's use: offsets of every tensor, memoised, from the flat listing ---- */
#define MAX_TENSORS 100000
static char *bytes_expr[MAX_TENSORS], *offset_expr[MAX_TENSORS];
static i64 offset[MAX_TENSORS], size[MAX_TENSORS];
static char state[MAX_TENSORS];
static const char *names[64]; static i64 values[64]; static int nsym; static i64 alignment;

static i64 end_of(int k, void *user);
static i64 offset_of(int k) {
    int ok = 1;
    if (k < 0 || k >= MAX_TENSORS || !offset_expr[k] || state[k] == 1) { fprintf(stderr, "bad $%d\n", k); exit(2); }
    if (state[k] == 2) return offset[k];
    state[k] = 1;
    size[k] = memplan_eval(bytes_expr[k], names, values, nsym, end_of, NULL, &ok);
    offset[k] = ok ? memplan_eval(offset_expr[k], names, values, nsym, end_of, NULL, &ok) : 0;
    if (!ok) { fprintf(stderr, "bad expression for tensor %d\n", k); exit(2); }
    state[k] = 2;
    return offset[k];
}
static i64 end_of(int k, void *user) {
    (void)user;
    i64 o = offset_of(k);
    return o + (size[k] + alignment - 1) / alignment * alignment;
}

int main(void) {
    static char line[1 << 16];
    if (!fgets(line, sizeof line, stdin)) return 2;
    char *tok = strtok(line, " \n");
    alignment = strtoll(tok, NULL, 10);
    while ((tok = strtok(NULL, " \n")) && nsym < 64) {
        char *eq = strchr(tok, '=');
        if (!eq) return 2;
        *eq = '\0';
        names[nsym] = strdup(tok);
        values[nsym++] = strtoll(eq + 1, NULL, 10);
    }
    int order[MAX_TENSORS], count = 0;
    char *arena = NULL;
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        char *a = strchr(line, '|'); if (!a) continue;
        *a++ = '\0';
        if (strcmp(line, "arena") == 0) { arena = strdup(a); continue; }
        char *b = strchr(a, '|'); if (!b) return 2;
        *b++ = '\0';
        int k = atoi(line);
        if (k < 0 || k >= MAX_TENSORS || count >= MAX_TENSORS) return 2;
        bytes_expr[k] = strdup(a); offset_expr[k] = strdup(b); order[count++] = k;
    }
    for (int i = 0; i < count; i++) {
        int k = order[i];
        i64 o = offset_of(k);
        printf("%d %lld %lld\n", k, o, size[k]);
    }
    int ok = 1;
    i64 total = arena ? memplan_eval(arena, names, values, nsym, end_of, NULL, &ok) : 0;
    if (!ok) return 2;
    printf("arena %lld\n", total);
    return 0;
}
