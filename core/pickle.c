// The pickle machine behind core/pickle.h: values and the VM (opcodes, stack, marks, memo), the
// few callables a numpy state dict names, and the conversion of the resulting dict into float32
// tensors.
#include "core/pickle.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"
#include "core/half.h"

// ---- values -----------------------------------------------------------------------------------
// Every value lives until the machine is torn down (the memo may share any of them, and a
// hostile file may build cycles), so they are kept in one list and freed together; nothing
// here recurses over a value graph.

enum { V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_BYTES, V_TUPLE, V_LIST, V_DICT, V_GLOBAL, V_ARRAY, V_DTYPE };
static const char *const kind_names[] = {"None", "bool", "int", "float", "str", "bytes", "tuple",
                                         "list", "dict", "global", "ndarray", "dtype"};

// The only callables a numpy state dict names.
enum { G_RECONSTRUCT = 1, G_NDARRAY, G_DTYPE, G_ODICT, G_ENCODE };

typedef struct Val Val;
struct Val {
    int kind;
    int64_t i;
    double f;
    const uint8_t *s;  // STR (UTF-8) / BYTES: into the buffer, or `owned`
    size_t n;
    uint8_t *owned;
    Val **items;  // TUPLE / LIST items; DICT: key, value, key, value...
    int nitems, cap;
    int global;
    // ndarray (after BUILD) / dtype
    int built;
    int ndim;
    int64_t shape[OCR_PD_MAX_DIMS];
    char descr[8];
    char order;  // dtype byte order: '<', '>', '|', '='
    const Val *dtype;
    int fortran;
    const uint8_t *data;
    size_t nbytes;
};

#define MAX_MEMO (1 << 20)
#define MAX_ITEMS (1 << 26)

typedef struct {
    const char *name;
    const uint8_t *p0, *p, *end;
    size_t op_at;  // offset of the opcode being run
    int op;
    Val **all;
    int nall, capall;
    Val **stack;
    int sp, capstack;
    int *marks;
    int nmarks, capmarks;
    Val **memo;
    int nmemo, capmemo;
    int protocol;
} Vm;

static ocr_status_t bad(Vm *vm, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ocr_status_t bad(Vm *vm, const char *fmt, ...) {
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return ocr_set_error(OCR_ERR_FORMAT, "%s: pickle opcode 0x%02x at byte %zu: %s", vm->name, (unsigned)vm->op, vm->op_at, what);
}

static Val *new_val(Vm *vm, int kind) {
    if (vm->nall == vm->capall) {
        int nc = vm->capall ? 2 * vm->capall : 256;
        Val **na = realloc(vm->all, (size_t)nc * sizeof *na);
        if (!na) return NULL;
        vm->all = na;
        vm->capall = nc;
    }
    Val *v = calloc(1, sizeof *v);
    if (!v) return NULL;
    v->kind = kind;
    vm->all[vm->nall++] = v;
    return v;
}

static ocr_status_t oom(void) { return ocr_set_error(OCR_ERR_OOM, "out of host memory"); }

static ocr_status_t push(Vm *vm, Val *v) {
    if (!v) return oom();
    if (vm->sp == vm->capstack) {
        int nc = vm->capstack ? 2 * vm->capstack : 64;
        if (nc > MAX_ITEMS) return bad(vm, "the stack grows past %d entries", MAX_ITEMS);
        Val **ns = realloc(vm->stack, (size_t)nc * sizeof *ns);
        if (!ns) return oom();
        vm->stack = ns;
        vm->capstack = nc;
    }
    vm->stack[vm->sp++] = v;
    return OCR_OK;
}

static int stack_floor(const Vm *vm) { return vm->nmarks ? vm->marks[vm->nmarks - 1] : 0; }

static ocr_status_t pop(Vm *vm, Val **v) {
    *v = NULL;
    if (vm->sp <= stack_floor(vm)) return bad(vm, "pops an empty stack%s", vm->nmarks ? " (above the mark)" : "");
    *v = vm->stack[--vm->sp];
    return OCR_OK;
}

static ocr_status_t top(Vm *vm, Val **v) {
    *v = NULL;
    if (vm->sp <= stack_floor(vm)) return bad(vm, "needs a value on the stack");
    *v = vm->stack[vm->sp - 1];
    return OCR_OK;
}

static ocr_status_t add_item(Vm *vm, Val *c, Val *x) {
    if (c->nitems == c->cap) {
        int nc = c->cap ? 2 * c->cap : 4;
        if (nc > MAX_ITEMS) return bad(vm, "a container grows past %d items", MAX_ITEMS);
        Val **ni = realloc(c->items, (size_t)nc * sizeof *ni);
        if (!ni) return oom();
        c->items = ni;
        c->cap = nc;
    }
    c->items[c->nitems++] = x;
    return OCR_OK;
}

static int str_eq(const Val *v, const char *s) {
    return v->kind == V_STR && v->n == strlen(s) && memcmp(v->s, s, v->n) == 0;
}

// dict[k] = x. Keys are only appended here (a linear duplicate search would make a hostile
// file with many keys quadratic); the state dict's keys are checked for duplicates once, sorted,
// in to_params, and a repeated key is an error there (paddle.save never writes one).
static ocr_status_t dict_set(Vm *vm, Val *d, Val *k, Val *x) {
    if (d->kind != V_DICT) return bad(vm, "sets an item on a %s", kind_names[d->kind]);
    if (k->kind != V_STR && k->kind != V_INT) return bad(vm, "a dict key of type %s", kind_names[k->kind]);
    OCR_TRY(add_item(vm, d, k));
    return add_item(vm, d, x);
}

// ---- reading the opcode stream --------------------------------------------------------------------

static ocr_status_t take(Vm *vm, size_t n, const uint8_t **out) {
    *out = NULL;
    if ((size_t)(vm->end - vm->p) < n) return bad(vm, "needs %zu argument bytes, %zu left in the file", n, (size_t)(vm->end - vm->p));
    *out = vm->p;
    vm->p += n;
    return OCR_OK;
}

static ocr_status_t take_uint(Vm *vm, int bytes, uint64_t *v) {
    const uint8_t *q;
    *v = 0;
    OCR_TRY(take(vm, (size_t)bytes, &q));
    *v = 0;
    for (int k = bytes - 1; k >= 0; k--) *v = (*v << 8) | q[k];
    return OCR_OK;
}

static ocr_status_t push_blob(Vm *vm, int kind, int len_bytes) {
    uint64_t n;
    OCR_TRY(take_uint(vm, len_bytes, &n));
    if (n > (uint64_t)(vm->end - vm->p)) return bad(vm, "a %llu-byte %s runs past the end of the file", (unsigned long long)n, kind_names[kind]);
    Val *v = new_val(vm, kind);
    if (!v) return oom();
    OCR_TRY(take(vm, (size_t)n, &v->s));
    v->n = (size_t)n;
    return push(vm, v);
}

static ocr_status_t memo_put(Vm *vm, uint64_t idx) {
    Val *v;
    OCR_TRY(top(vm, &v));
    if (idx >= MAX_MEMO) return bad(vm, "memo index %llu is past the limit %d", (unsigned long long)idx, MAX_MEMO);
    if ((int)idx >= vm->capmemo) {
        int nc = vm->capmemo ? vm->capmemo : 64;
        while (nc <= (int)idx) nc *= 2;
        Val **nm = realloc(vm->memo, (size_t)nc * sizeof *nm);
        if (!nm) return oom();
        memset(nm + vm->capmemo, 0, (size_t)(nc - vm->capmemo) * sizeof *nm);
        vm->memo = nm;
        vm->capmemo = nc;
    }
    vm->memo[idx] = v;
    if ((int)idx >= vm->nmemo) vm->nmemo = (int)idx + 1;
    return OCR_OK;
}

static ocr_status_t memo_get(Vm *vm, uint64_t idx) {
    if (idx >= (uint64_t)vm->nmemo || !vm->memo[idx]) return bad(vm, "memo index %llu was never stored", (unsigned long long)idx);
    return push(vm, vm->memo[idx]);
}

// Pops everything above the last mark into a new tuple/list (or returns the count for dicts).
static ocr_status_t pop_mark(Vm *vm, int *start) {
    *start = 0;
    if (!vm->nmarks) return bad(vm, "needs a MARK and there is none");
    *start = vm->marks[--vm->nmarks];
    return OCR_OK;
}

static ocr_status_t make_seq(Vm *vm, int kind, int count) {
    if (vm->sp - stack_floor(vm) < count) return bad(vm, "needs %d values on the stack", count);
    Val *t = new_val(vm, kind);
    if (!t) return oom();
    for (int k = vm->sp - count; k < vm->sp; k++) OCR_TRY(add_item(vm, t, vm->stack[k]));
    vm->sp -= count;
    return push(vm, t);
}

static ocr_status_t global(Vm *vm, const uint8_t *mod, size_t nm, const uint8_t *name, size_t nn) {
    static const struct {
        const char *mod, *name;
        int id;
    } allowed[] = {
        {"numpy._core.multiarray", "_reconstruct", G_RECONSTRUCT},
        {"numpy.core.multiarray", "_reconstruct", G_RECONSTRUCT},
        {"numpy", "ndarray", G_NDARRAY},
        {"numpy", "dtype", G_DTYPE},
        {"collections", "OrderedDict", G_ODICT},
        {"_codecs", "encode", G_ENCODE},
    };
    for (size_t k = 0; k < sizeof allowed / sizeof *allowed; k++) {
        if (strlen(allowed[k].mod) == nm && memcmp(allowed[k].mod, mod, nm) == 0 && strlen(allowed[k].name) == nn &&
            memcmp(allowed[k].name, name, nn) == 0) {
            Val *v = new_val(vm, V_GLOBAL);
            if (!v) return oom();
            v->global = allowed[k].id;
            return push(vm, v);
        }
    }
    return bad(vm, "refuses the global %.*s.%.*s (only numpy arrays, dtypes and dicts are read)", (int)(nm > 80 ? 80 : nm),
               (const char *)mod, (int)(nn > 80 ? 80 : nn), (const char *)name);
}

static int descr_size(const char *d) {
    if (!strcmp(d, "f4") || !strcmp(d, "i4") || !strcmp(d, "u4")) return 4;
    if (!strcmp(d, "f2") || !strcmp(d, "i2") || !strcmp(d, "u2")) return 2;
    if (!strcmp(d, "f8") || !strcmp(d, "i8") || !strcmp(d, "u8")) return 8;
    if (!strcmp(d, "b1") || !strcmp(d, "i1") || !strcmp(d, "u1")) return 1;
    return 0;
}

static ocr_status_t reduce(Vm *vm) {
    Val *args = NULL, *fn = NULL;
    OCR_TRY(pop(vm, &args));
    OCR_TRY(pop(vm, &fn));
    if (fn->kind != V_GLOBAL) return bad(vm, "calls a %s", kind_names[fn->kind]);
    if (args->kind != V_TUPLE) return bad(vm, "calls with %s arguments, not a tuple", kind_names[args->kind]);
    Val **a = args->items;
    int na = args->nitems;
    switch (fn->global) {
    case G_RECONSTRUCT: {
        // _reconstruct(numpy.ndarray, (0,), b'b'): an empty array that BUILD fills in.
        if (na != 3 || a[0]->kind != V_GLOBAL || a[0]->global != G_NDARRAY)
            return bad(vm, "_reconstruct is not called as _reconstruct(numpy.ndarray, shape, typecode)");
        return push(vm, new_val(vm, V_ARRAY));
    }
    case G_DTYPE: {
        if (na < 1 || a[0]->kind != V_STR || a[0]->n < 2 || a[0]->n > 4)
            return bad(vm, "numpy.dtype is not called with a type string");
        Val *d = new_val(vm, V_DTYPE);
        if (!d) return oom();
        memcpy(d->descr, a[0]->s, a[0]->n);
        d->order = '|';
        if (!descr_size(d->descr)) return bad(vm, "numpy.dtype('%s') is not a plain numeric type", d->descr);
        return push(vm, d);
    }
    case G_ODICT: {
        Val *d = new_val(vm, V_DICT);
        if (!d) return oom();
        if (na == 1 && a[0]->kind == V_LIST) {
            for (int k = 0; k < a[0]->nitems; k++) {
                const Val *pr = a[0]->items[k];
                if (pr->kind != V_TUPLE || pr->nitems != 2) return bad(vm, "OrderedDict from a list of non-pairs");
                OCR_TRY(dict_set(vm, d, pr->items[0], pr->items[1]));
            }
        } else if (na != 0) {
            return bad(vm, "OrderedDict called with %d arguments", na);
        }
        return push(vm, d);
    }
    case G_ENCODE: {
        // Protocol 2 writes bytes as _codecs.encode(str, 'latin1'): code points 0..255 → bytes.
        if (na != 2 || a[0]->kind != V_STR || !str_eq(a[1], "latin1"))
            return bad(vm, "_codecs.encode is only read as encode(str, 'latin1')");
        Val *b = new_val(vm, V_BYTES);
        if (!b) return oom();
        b->owned = malloc(a[0]->n ? a[0]->n : 1);
        if (!b->owned) return oom();
        size_t o = 0;
        for (size_t k = 0; k < a[0]->n;) {
            uint8_t c = a[0]->s[k];
            if (c < 0x80) {
                b->owned[o++] = c;
                k++;
            } else if ((c & 0xE0) == 0xC0 && k + 1 < a[0]->n && (a[0]->s[k + 1] & 0xC0) == 0x80) {
                unsigned cp = ((unsigned)(c & 0x1F) << 6) | (a[0]->s[k + 1] & 0x3F);
                if (cp > 0xFF || cp < 0x80) return bad(vm, "latin1 text with a code point outside 0x80..0xff");
                b->owned[o++] = (uint8_t)cp;
                k += 2;
            } else {
                return bad(vm, "latin1 text that is not valid UTF-8 for code points below 256");
            }
        }
        b->s = b->owned;
        b->n = o;
        return push(vm, b);
    }
    default: return bad(vm, "calls numpy.ndarray directly");
    }
}

static ocr_status_t build(Vm *vm) {
    Val *state = NULL, *obj = NULL;
    OCR_TRY(pop(vm, &state));
    OCR_TRY(top(vm, &obj));
    if (obj->kind == V_DTYPE) {
        // (version, byteorder, subarray, names, fields, elsize, alignment, flags[, metadata])
        if (state->kind != V_TUPLE || state->nitems < 2 || state->items[1]->kind != V_STR || state->items[1]->n != 1)
            return bad(vm, "a dtype state without a byte order");
        obj->order = (char)state->items[1]->s[0];
        if (!strchr("<>|=", obj->order)) return bad(vm, "dtype byte order '%c'", obj->order);
        if (state->nitems >= 3 && state->items[2]->kind != V_NONE) return bad(vm, "a sub-array dtype");
        if (state->nitems >= 4 && state->items[3]->kind != V_NONE) return bad(vm, "a structured dtype");
        return OCR_OK;
    }
    if (obj->kind != V_ARRAY) return bad(vm, "BUILD on a %s (only ndarrays and dtypes are built)", kind_names[obj->kind]);
    if (obj->built) return bad(vm, "an ndarray built twice");
    // (version, shape, dtype, is_fortran, raw data)
    if (state->kind != V_TUPLE || state->nitems != 5) return bad(vm, "an ndarray state that is not a 5-tuple");
    Val **s = state->items;
    if (s[1]->kind != V_TUPLE) return bad(vm, "an ndarray shape that is not a tuple");
    if (s[1]->nitems > OCR_PD_MAX_DIMS) return bad(vm, "an ndarray of %d dimensions (at most %d)", s[1]->nitems, OCR_PD_MAX_DIMS);
    if (s[2]->kind != V_DTYPE) return bad(vm, "an ndarray whose dtype is a %s", kind_names[s[2]->kind]);
    if (s[3]->kind != V_BOOL && s[3]->kind != V_INT) return bad(vm, "an ndarray without its Fortran-order flag");
    if (s[4]->kind != V_BYTES) return bad(vm, "an ndarray whose data is a %s, not bytes (object array?)", kind_names[s[4]->kind]);
    obj->ndim = s[1]->nitems;
    uint64_t numel = 1;
    for (int d = 0; d < obj->ndim; d++) {
        const Val *e = s[1]->items[d];
        if (e->kind != V_INT || e->i < 0 || e->i > ((int64_t)1 << 40)) return bad(vm, "an ndarray dimension that is not a size");
        obj->shape[d] = e->i;
        numel *= (uint64_t)e->i;
        if (numel > ((uint64_t)1 << 40)) return bad(vm, "an ndarray of more than 2^40 elements");
    }
    obj->dtype = s[2];
    obj->fortran = (int)s[3]->i;
    obj->data = s[4]->s;
    obj->nbytes = s[4]->n;
    uint64_t want = numel * (uint64_t)descr_size(s[2]->descr);
    if (want != obj->nbytes)
        return bad(vm, "an ndarray of %llu elements of %s carries %zu bytes, not %llu", (unsigned long long)numel, s[2]->descr,
                   obj->nbytes, (unsigned long long)want);
    obj->built = 1;
    return OCR_OK;
}

static ocr_status_t run(Vm *vm, Val **result) {
    for (;;) {
        vm->op_at = (size_t)(vm->p - vm->p0);
        if (vm->p >= vm->end) return ocr_set_error(OCR_ERR_FORMAT, "%s: the pickle ends at byte %zu without STOP (truncated?)", vm->name, vm->op_at);
        vm->op = *vm->p++;
        uint64_t u = 0;
        const uint8_t *q = NULL;
        Val *v = NULL, *w = NULL, *x = NULL;
        int start = 0;
        switch (vm->op) {
        case 0x80:  // PROTO
            OCR_TRY(take_uint(vm, 1, &u));
            if (u < 2 || u > 5) return bad(vm, "pickle protocol %llu (2 to 5 are read)", (unsigned long long)u);
            vm->protocol = (int)u;
            break;
        case 0x95: OCR_TRY(take_uint(vm, 8, &u)); break;  // FRAME: framing is only a read-ahead hint
        case '.':
            if (vm->sp != 1 || vm->nmarks) return bad(vm, "STOP with %d values and %d marks on the stack", vm->sp, vm->nmarks);
            *result = vm->stack[0];
            return OCR_OK;
        case '(':
            if (vm->nmarks == vm->capmarks) {
                int nc = vm->capmarks ? 2 * vm->capmarks : 16;
                if (nc > MAX_ITEMS) return bad(vm, "too many open marks");
                int *nm = realloc(vm->marks, (size_t)nc * sizeof *nm);
                if (!nm) return oom();
                vm->marks = nm;
                vm->capmarks = nc;
            }
            vm->marks[vm->nmarks++] = vm->sp;
            break;
        case '0': OCR_TRY(pop(vm, &v)); break;  // POP
        case '1': OCR_TRY(pop_mark(vm, &start)); vm->sp = start; break;  // POP_MARK
        case '2': OCR_TRY(top(vm, &v)); OCR_TRY(push(vm, v)); break;  // DUP
        case '}': OCR_TRY(push(vm, new_val(vm, V_DICT))); break;
        case ']': OCR_TRY(push(vm, new_val(vm, V_LIST))); break;
        case ')': OCR_TRY(push(vm, new_val(vm, V_TUPLE))); break;
        case 0x85: OCR_TRY(make_seq(vm, V_TUPLE, 1)); break;
        case 0x86: OCR_TRY(make_seq(vm, V_TUPLE, 2)); break;
        case 0x87: OCR_TRY(make_seq(vm, V_TUPLE, 3)); break;
        case 't':
        case 'l': {
            OCR_TRY(pop_mark(vm, &start));
            OCR_TRY(make_seq(vm, vm->op == 't' ? V_TUPLE : V_LIST, vm->sp - start));
            break;
        }
        case 'd': {
            OCR_TRY(pop_mark(vm, &start));
            if ((vm->sp - start) % 2) return bad(vm, "DICT with an odd number of values");
            Val *d = new_val(vm, V_DICT);
            if (!d) return oom();
            for (int k = start; k < vm->sp; k += 2) OCR_TRY(dict_set(vm, d, vm->stack[k], vm->stack[k + 1]));
            vm->sp = start;
            OCR_TRY(push(vm, d));
            break;
        }
        case 'a':  // APPEND
            OCR_TRY(pop(vm, &x));
            OCR_TRY(top(vm, &v));
            if (v->kind != V_LIST) return bad(vm, "APPEND to a %s", kind_names[v->kind]);
            OCR_TRY(add_item(vm, v, x));
            break;
        case 'e':  // APPENDS
            OCR_TRY(pop_mark(vm, &start));
            if (start < 1 || start <= stack_floor(vm)) return bad(vm, "APPENDS without a list below the mark");
            v = vm->stack[start - 1];
            if (v->kind != V_LIST) return bad(vm, "APPENDS to a %s", kind_names[v->kind]);
            for (int k = start; k < vm->sp; k++) OCR_TRY(add_item(vm, v, vm->stack[k]));
            vm->sp = start;
            break;
        case 's':  // SETITEM
            OCR_TRY(pop(vm, &x));
            OCR_TRY(pop(vm, &w));
            OCR_TRY(top(vm, &v));
            OCR_TRY(dict_set(vm, v, w, x));
            break;
        case 'u':  // SETITEMS
            OCR_TRY(pop_mark(vm, &start));
            if (start < 1 || start <= stack_floor(vm)) return bad(vm, "SETITEMS without a dict below the mark");
            if ((vm->sp - start) % 2) return bad(vm, "SETITEMS with an odd number of values");
            v = vm->stack[start - 1];
            for (int k = start; k < vm->sp; k += 2) OCR_TRY(dict_set(vm, v, vm->stack[k], vm->stack[k + 1]));
            vm->sp = start;
            break;
        case 0x94: OCR_TRY(memo_put(vm, (uint64_t)vm->nmemo)); break;  // MEMOIZE
        case 'q': OCR_TRY(take_uint(vm, 1, &u)); OCR_TRY(memo_put(vm, u)); break;
        case 'r': OCR_TRY(take_uint(vm, 4, &u)); OCR_TRY(memo_put(vm, u)); break;
        case 'h': OCR_TRY(take_uint(vm, 1, &u)); OCR_TRY(memo_get(vm, u)); break;
        case 'j': OCR_TRY(take_uint(vm, 4, &u)); OCR_TRY(memo_get(vm, u)); break;
        case 'J':
        case 'K':
        case 'M': {
            OCR_TRY(take_uint(vm, vm->op == 'J' ? 4 : vm->op == 'K' ? 1 : 2, &u));
            v = new_val(vm, V_INT);
            if (!v) return oom();
            v->i = vm->op == 'J' ? (int64_t)(int32_t)(uint32_t)u : (int64_t)u;
            OCR_TRY(push(vm, v));
            break;
        }
        case 0x8a: {  // LONG1: little-endian two's complement of n bytes
            OCR_TRY(take_uint(vm, 1, &u));
            if (u > 8) return bad(vm, "a %llu-byte integer (at most 8 are read)", (unsigned long long)u);
            OCR_TRY(take(vm, (size_t)u, &q));
            uint64_t r = 0;
            for (int k = (int)u - 1; k >= 0; k--) r = (r << 8) | q[k];
            if (u > 0 && u < 8 && (q[u - 1] & 0x80)) r |= ~(uint64_t)0 << (8 * u);
            v = new_val(vm, V_INT);
            if (!v) return oom();
            v->i = (int64_t)r;
            OCR_TRY(push(vm, v));
            break;
        }
        case 'N': OCR_TRY(push(vm, new_val(vm, V_NONE))); break;
        case 0x88:
        case 0x89:
            v = new_val(vm, V_BOOL);
            if (!v) return oom();
            v->i = vm->op == 0x88;
            OCR_TRY(push(vm, v));
            break;
        case 'G': {  // BINFLOAT: big-endian double
            OCR_TRY(take(vm, 8, &q));
            uint64_t r = 0;
            for (int k = 0; k < 8; k++) r = (r << 8) | q[k];
            v = new_val(vm, V_FLOAT);
            if (!v) return oom();
            memcpy(&v->f, &r, 8);
            OCR_TRY(push(vm, v));
            break;
        }
        case 0x8c: OCR_TRY(push_blob(vm, V_STR, 1)); break;    // SHORT_BINUNICODE
        case 'X': OCR_TRY(push_blob(vm, V_STR, 4)); break;     // BINUNICODE
        case 0x8d: OCR_TRY(push_blob(vm, V_STR, 8)); break;    // BINUNICODE8
        case 'C': OCR_TRY(push_blob(vm, V_BYTES, 1)); break;   // SHORT_BINBYTES
        case 'B': OCR_TRY(push_blob(vm, V_BYTES, 4)); break;   // BINBYTES
        case 0x8e: OCR_TRY(push_blob(vm, V_BYTES, 8)); break;  // BINBYTES8
        case 'U': OCR_TRY(push_blob(vm, V_BYTES, 1)); break;   // SHORT_BINSTRING (Python 2 str)
        case 'T': OCR_TRY(push_blob(vm, V_BYTES, 4)); break;   // BINSTRING
        case 'c': {  // GLOBAL "module\nname\n"
            const uint8_t *m0 = vm->p, *nl1 = memchr(vm->p, '\n', (size_t)(vm->end - vm->p));
            if (!nl1) return bad(vm, "GLOBAL without its module line");
            const uint8_t *n0 = nl1 + 1, *nl2 = memchr(n0, '\n', (size_t)(vm->end - n0));
            if (!nl2) return bad(vm, "GLOBAL without its name line");
            vm->p = nl2 + 1;
            OCR_TRY(global(vm, m0, (size_t)(nl1 - m0), n0, (size_t)(nl2 - n0)));
            break;
        }
        case 0x93:  // STACK_GLOBAL
            OCR_TRY(pop(vm, &w));
            OCR_TRY(pop(vm, &v));
            if (v->kind != V_STR || w->kind != V_STR) return bad(vm, "STACK_GLOBAL without module and name strings");
            OCR_TRY(global(vm, v->s, v->n, w->s, w->n));
            break;
        case 'R': OCR_TRY(reduce(vm)); break;
        case 'b': OCR_TRY(build(vm)); break;
        default:
            return bad(vm, "is not one of the opcodes numpy state dicts use (persistent ids, objects, extensions and "
                           "out-of-band buffers are not read)");
        }
    }
}

// ---- to tensors ----------------------------------------------------------------------------------

static ocr_status_t add_other(OcrPdparams *p, int *cap, const Val *key, const char *why) {
    if (p->nother == *cap) {
        int nc = *cap ? 2 * *cap : 8;
        char **no = realloc(p->other, (size_t)nc * sizeof *no);
        if (!no) return oom();
        p->other = no;
        *cap = nc;
    }
    size_t n = key->n + strlen(why) + 4;
    char *s = malloc(n);
    if (!s) return oom();
    snprintf(s, n, "%.*s (%s)", (int)key->n, (const char *)key->s, why);
    p->other[p->nother++] = s;
    return OCR_OK;
}

static float load_elem(const uint8_t *q, const char *descr, int big) {
    uint8_t b[8];
    int n = descr_size(descr);
    for (int k = 0; k < n; k++) b[k] = big ? q[n - 1 - k] : q[k];
    if (descr[0] == 'f' && n == 4) {
        float f;
        memcpy(&f, b, 4);
        return f;
    }
    if (descr[0] == 'f' && n == 2) return ocr_f16_to_f32((uint16_t)(b[0] | (b[1] << 8)));
    double d;
    memcpy(&d, b, 8);
    return (float)d;
}

static int cmp_key(const void *a, const void *b) {
    const Val *x = *(const Val *const *)a, *y = *(const Val *const *)b;
    if (x->kind != y->kind) return x->kind - y->kind;
    if (x->kind == V_INT) return (x->i > y->i) - (x->i < y->i);
    size_t n = x->n < y->n ? x->n : y->n;
    int c = n ? memcmp(x->s, y->s, n) : 0;
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

static ocr_status_t to_params(Vm *vm, const Val *root, OcrPdparams *p) {
    if (root->kind != V_DICT)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: the pickle holds a %s, not a state dict", vm->name, kind_names[root->kind]);
    int n = root->nitems / 2, ocap = 0;
    const Val **keys = malloc((size_t)(n ? n : 1) * sizeof *keys);
    if (!keys) return oom();
    for (int k = 0; k < n; k++) keys[k] = root->items[2 * k];
    qsort(keys, (size_t)n, sizeof *keys, cmp_key);
    for (int k = 1; k < n; k++) {
        if (cmp_key(&keys[k - 1], &keys[k]) == 0) {
            const Val *b = keys[k];
            ocr_status_t st = b->kind == V_STR
                                  ? ocr_set_error(OCR_ERR_FORMAT, "%s: the state dict has the key %.*s twice", vm->name,
                                                  (int)(b->n > 200 ? 200 : b->n), (const char *)b->s)
                                  : ocr_set_error(OCR_ERR_FORMAT, "%s: the state dict has a repeated key", vm->name);
            free(keys);
            return st;
        }
    }
    free(keys);
    p->tensors = calloc((size_t)(n ? n : 1), sizeof *p->tensors);
    if (!p->tensors) return oom();
    for (int k = 0; k < n; k++) {
        const Val *key = root->items[2 * k], *val = root->items[2 * k + 1];
        if (key->kind != V_STR) return ocr_set_error(OCR_ERR_FORMAT, "%s: a state dict key that is not a string", vm->name);
        if (memchr(key->s, 0, key->n)) return ocr_set_error(OCR_ERR_FORMAT, "%s: a key with a NUL byte", vm->name);
        if (val->kind != V_ARRAY) {
            OCR_TRY(add_other(p, &ocap, key, kind_names[val->kind]));
            continue;
        }
        if (!val->built)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: %.*s: an ndarray that was never given its data", vm->name, (int)key->n,
                                 (const char *)key->s);
        const char *d = val->dtype->descr;
        if (d[0] != 'f') {
            char why[32];
            snprintf(why, sizeof why, "%s array, not float", d);
            OCR_TRY(add_other(p, &ocap, key, why));
            continue;
        }
        if (val->fortran && val->ndim > 1)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: %.*s is stored in Fortran order", vm->name, (int)key->n, (const char *)key->s);
        OcrPdTensor *t = &p->tensors[p->count];
        t->name = malloc(key->n + 1);
        if (!t->name) return oom();
        memcpy(t->name, key->s, key->n);
        t->name[key->n] = 0;
        p->count++;
        t->ndim = val->ndim;
        memcpy(t->shape, val->shape, sizeof t->shape);
        t->numel = 1;
        for (int i = 0; i < t->ndim; i++) t->numel *= t->shape[i];
        snprintf(t->dtype, sizeof t->dtype, "%s", d);
        t->f32 = malloc((size_t)(t->numel ? t->numel : 1) * sizeof(float));
        if (!t->f32) return oom();
        int es = descr_size(d), big = val->dtype->order == '>';
        if (es == 4 && !big) {
            memcpy(t->f32, val->data, (size_t)t->numel * 4);
        } else {
            for (int64_t i = 0; i < t->numel; i++) t->f32[i] = load_elem(val->data + (size_t)i * (size_t)es, d, big);
        }
    }
    return OCR_OK;
}

ocr_status_t ocr_pdparams_parse(OcrPdparams **out, const uint8_t *data, size_t size, const char *name) {
    *out = NULL;
    Vm vm;
    memset(&vm, 0, sizeof vm);
    vm.name = name;
    vm.p0 = vm.p = data;
    vm.end = data + size;
    ocr_status_t st;
    Val *root = NULL;
    if (size < 2 || data[0] != 0x80)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s: not a pickle of protocol 2 or later (first byte 0x%02x; is it a .pdparams?)",
                           name, size ? data[0] : 0);
    else
        st = run(&vm, &root);
    OcrPdparams *p = NULL;
    if (st == OCR_OK) {
        p = calloc(1, sizeof *p);
        if (!p) st = oom();
    }
    if (st == OCR_OK) {
        p->protocol = vm.protocol;
        st = to_params(&vm, root, p);
    }
    if (st == OCR_OK && vm.p != vm.end)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s: %zu bytes after the pickle's STOP", name, (size_t)(vm.end - vm.p));
    for (int i = 0; i < vm.nall; i++) {
        free(vm.all[i]->items);
        free(vm.all[i]->owned);
        free(vm.all[i]);
    }
    free(vm.all);
    free(vm.stack);
    free(vm.marks);
    free(vm.memo);
    if (st != OCR_OK) {
        ocr_pdparams_free(p);
        return st;
    }
    *out = p;
    return OCR_OK;
}

ocr_status_t ocr_pdparams_load(OcrPdparams **out, const char *path) {
    char *data;
    size_t size;
    *out = NULL;
    OCR_TRY(ocr_read_file(path, &data, &size));
    ocr_status_t st = ocr_pdparams_parse(out, (const uint8_t *)data, size, path);
    free(data);
    return st;
}

void ocr_pdparams_free(OcrPdparams *p) {
    if (!p) return;
    for (int i = 0; i < p->count; i++) {
        free(p->tensors[i].name);
        free(p->tensors[i].f32);
    }
    free(p->tensors);
    for (int i = 0; i < p->nother; i++) free(p->other[i]);
    free(p->other);
    free(p);
}

const OcrPdTensor *ocr_pdparams_find(const OcrPdparams *p, const char *name) {
    for (int i = 0; i < p->count; i++)
        if (strcmp(p->tensors[i].name, name) == 0) return &p->tensors[i];
    return NULL;
}
