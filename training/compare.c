// Regression runs (training/compare.h): legs × seeds of trainings, scored line by line, judged
// by eval/seeds.h. The order of the work is seed-major (every leg at the first seed, then every
// leg at the second, ...), so an interrupted comparison has complete pairs for the seeds it
// finished and a resumed one starts at the first missing run.
#include "training/compare.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/fileio.h"
#include "data/transforms.h"
#include "distributed/dist.h"
#include "kernels/backend.h"
#include "models/model.h"
#include "training/capacity.h"
#include "training/capacity_run.h"
#include "training/evaluate.h"
#include "training/inference.h"
#include "training/trainer.h"

// ---- seeds ---------------------------------------------------------------------------------------

static int parse_u64(const char *s, const char *end, uint64_t *out) {
    if (s == end) return 0;
    uint64_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9') return 0;
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

ocr_status_t compare_parse_seeds(const char *arg, uint64_t base_seed, const char *what, uint64_t *seeds, int *n) {
    *n = 0;
    if (!arg || !*arg) return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: empty (a seed count such as 3, or a list such as 1,2,3)", what);
    if (!strchr(arg, ',')) {
        if (arg[0] == '-')
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: %s is negative: give a number of seeds (1 to %d) or a list", what,
                                 arg, COMPARE_MAX_SEEDS);
        uint64_t count;
        if (!parse_u64(arg, arg + strlen(arg), &count))
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: '%s' is not a number of seeds or a comma-separated seed list", what,
                                 arg);
        if (count < 1)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: 0 seeds trains nothing: give 1 to %d", what, COMPARE_MAX_SEEDS);
        if (count > COMPARE_MAX_SEEDS)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: %llu seeds, at most %d", what, (unsigned long long)count,
                                 COMPARE_MAX_SEEDS);
        for (uint64_t i = 0; i < count; i++) seeds[i] = base_seed + i;
        *n = (int)count;
        return OCR_OK;
    }
    const char *p = arg;
    int k = 0;
    for (;;) {
        const char *end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        uint64_t v;
        if (*p == '-')
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: a seed is a non-negative integer, got '%.*s'", what, (int)(end - p), p);
        if (!parse_u64(p, end, &v))
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: '%.*s' in '%s' is not a seed (a non-negative integer)", what,
                                 (int)(end - p), p, arg);
        if (k == COMPARE_MAX_SEEDS)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: more than %d seeds", what, COMPARE_MAX_SEEDS);
        for (int j = 0; j < k; j++)
            if (seeds[j] == v)
                return ocr_set_error(OCR_ERR_INVALID_ARG, "%s: seed %llu is listed twice: each seed trains once per leg",
                                     what, (unsigned long long)v);
        seeds[k++] = v;
        if (!*end || !end[1]) break;  // a trailing comma ends the list ("7," is the one seed 7)
        p = end + 1;
    }
    *n = k;
    return OCR_OK;
}

// ---- legs ----------------------------------------------------------------------------------------

typedef struct {
    char name[32];
    const char *level, *dtype;  // AMP legs: the precision (NULL: FP32); config legs: NULL
    const OcrConfig *source;    // the config the leg's runs start from
    int batch;                  // 0: the config's
    OcrConfig *cfg;             // source + the leg's precision and batch (no seed, no directory)
    RunConfig rc;
} Leg;

static ocr_status_t apply(OcrConfig *cfg, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static ocr_status_t apply(OcrConfig *cfg, const char *fmt, ...) {
    char ov[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ov, sizeof ov, fmt, ap);
    va_end(ap);
    return ocr_config_apply_override(cfg, ov);
}

// The leg's config: precision (AMP legs) and batch; checkpoints off (every run starts from the
// configured start, never from a checkpoint a leg left).
static ocr_status_t leg_config(Leg *g) {
    OCR_TRY(ocr_config_clone(&g->cfg, g->source));
    ocr_status_t st = OCR_OK;
    if (g->level || (!g->dtype && strcmp(g->name, "fp32") == 0)) {
        st = apply(g->cfg, "Global.use_amp=%s", g->level ? "true" : "false");
        if (st == OCR_OK && g->level) st = apply(g->cfg, "Global.amp_level=%s", g->level);
        if (st == OCR_OK && g->level) st = apply(g->cfg, "Global.amp_dtype=%s", g->dtype);
    }
    if (st == OCR_OK) st = apply(g->cfg, "Global.checkpoints=null");
    if (st == OCR_OK && g->batch > 0) st = apply(g->cfg, "Train.loader.batch_size_per_card=%d", g->batch);
    if (st == OCR_OK) st = run_config_read(&g->rc, g->cfg, RUN_NEED_TRAIN | RUN_NEED_EVAL);
    return st;
}

// One run's config: the leg's at this seed, written under OUT/runs/<leg>/seed-<s>.
static ocr_status_t seed_config(OcrConfig **out, RunConfig *rc, const Leg *g, uint64_t seed, const char *dir) {
    OCR_TRY(ocr_config_clone(out, g->cfg));
    ocr_status_t st = apply(*out, "Global.seed=%llu", (unsigned long long)seed);
    if (st == OCR_OK) st = apply(*out, "Global.save_model_dir=\"%s\"", dir);
    if (st == OCR_OK) st = run_config_read(rc, *out, RUN_NEED_TRAIN | RUN_NEED_EVAL);
    if (st != OCR_OK) {
        ocr_config_free(*out);
        *out = NULL;
    }
    return st;
}

// --batch max: the largest batch the leg's precision fits in the budget, planned, then checked
// with real steps and lowered until it fits (the plan extrapolates op scratch from two small
// probes; scratch grows in blocks and by other rules on other CPUs).
static ocr_status_t plan_batch(const OcrConfig *cfg, const char *pname, int64_t memory, int *batch) {
    if (!capacity_precision_overrides(pname))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--batch max plans fp32, fp16-o1, fp16-o2 and bf16-o2; %s has no plan",
                             pname);
    CapacityPrecision cp;
    OCR_TRY(capacity_plan(cfg, pname, memory, &cp));
    if (cp.max_batch < 1)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--memory %lld bytes does not fit one %s sample (fixed %lld, %lld per sample)",
                             (long long)memory, pname, (long long)cp.fixed_bytes, (long long)cp.bytes_per_sample);
    *batch = cp.max_batch > 65536 ? 65536 : (int)cp.max_batch;
    for (int tries = 0; tries < 4; tries++) {
        OcrMemStats ms;
        OCR_TRY(capacity_measure(cfg, pname, *batch, &ms));
        if (ms.peak_total <= memory) break;
        int64_t excess = ms.peak_total - memory, per = cp.bytes_per_sample > 0 ? cp.bytes_per_sample : 1;
        int lower = *batch - (int)((excess + per - 1) / per);
        if (lower >= *batch) lower = *batch - 1;
        ocr_log(OCR_LOG_INFO, "--batch max: %s at batch %d measured %lld bytes, over --memory %lld; trying %d", pname, *batch,
                (long long)ms.peak_total, (long long)memory, lower);
        if (lower < 1)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "--memory %lld bytes does not fit one %s sample (measured)",
                                 (long long)memory, pname);
        *batch = lower;
    }
    return OCR_OK;
}

static ocr_status_t make_legs(const OcrConfig *cfg, const CompareOptions *o, Leg *legs, int *nlegs) {
    *nlegs = 0;
    if (o->candidate) {
        snprintf(legs[0].name, sizeof legs[0].name, "baseline");
        legs[0].source = cfg;
        snprintf(legs[1].name, sizeof legs[1].name, "candidate");
        legs[1].source = o->candidate;
        *nlegs = 2;
        return OCR_OK;
    }
    snprintf(legs[0].name, sizeof legs[0].name, "fp32");
    legs[0].source = cfg;
    int n = 1;
    const char *cfg_dtype, *cfg_level;
    OCR_TRY(ocr_config_get_string(cfg, "Global.amp_dtype", "float16", &cfg_dtype));
    OCR_TRY(ocr_config_get_string(cfg, "Global.amp_level", "O2", &cfg_level));
    const char *const *dts = o->n_dtypes ? o->dtypes : &cfg_dtype, *const *lvs = o->n_levels ? o->levels : &cfg_level;
    const int nd = o->n_dtypes ? o->n_dtypes : 1, nl = o->n_levels ? o->n_levels : 1;
    for (int l = 0; l < nl; l++) {
        if (strcmp(lvs[l], "O1") != 0 && strcmp(lvs[l], "O2") != 0)
            return ocr_set_error(OCR_ERR_INVALID_ARG, "--levels: %s is not O1 or O2", lvs[l]);
        for (int d = 0; d < nd; d++) {
            const char *shortname = strcmp(dts[d], "float16") == 0 ? "fp16" : strcmp(dts[d], "bfloat16") == 0 ? "bf16" : NULL;
            if (!shortname) return ocr_set_error(OCR_ERR_INVALID_ARG, "--dtypes: %s is not float16 or bfloat16", dts[d]);
            if (n == REPORT_MAX_RUNS) return ocr_set_error(OCR_ERR_INVALID_ARG, "at most %d legs", REPORT_MAX_RUNS);
            Leg *g = &legs[n++];
            snprintf(g->name, sizeof g->name, "%s-o%c", shortname, lvs[l][1]);
            g->level = lvs[l];
            g->dtype = dts[d];
            g->source = cfg;
        }
    }
    *nlegs = n;
    return OCR_OK;
}

// ---- OUT/compare.json: what OUT was made with ------------------------------------------------------

// Keys that differ between runs of one leg by design (set per run) or that do not change what a
// run trains: left out of the resume check.
static int key_ignored(const char *path) {
    // EvalGeneral only adds a set to score: a run trained without it is rescored, not retrained.
    static const char *const ignored[] = {"Global.seed", "Global.save_model_dir", "Global.checkpoints",
                                          "Global.compare_seeds", "Global.print_batch_step", "Global.threads",
                                          "EvalGeneral", NULL};
    for (int i = 0; ignored[i]; i++)
        if (strcmp(path, ignored[i]) == 0) return 1;
    return 0;
}

// The first key (dotted path) whose value differs between a and b, into key; 0 when none.
static int first_difference(const cJSON *a, const cJSON *b, const char *prefix, char *key, size_t cap) {
    char path[512];
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        for (const cJSON *x = a->child; x; x = x->next) {
            snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", x->string);
            if (key_ignored(path)) continue;
            const cJSON *y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y) {
                snprintf(key, cap, "%s", path);
                return 1;
            }
            if (first_difference(x, y, path, key, cap)) return 1;
        }
        for (const cJSON *y = b->child; y; y = y->next) {
            snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", y->string);
            if (key_ignored(path)) continue;
            if (!cJSON_GetObjectItemCaseSensitive(a, y->string)) {
                snprintf(key, cap, "%s", path);
                return 1;
            }
        }
        return 0;
    }
    if (!cJSON_Compare(a, b, 1)) {
        snprintf(key, cap, "%s", *prefix ? prefix : "(the whole config)");
        return 1;
    }
    return 0;
}

static char *value_text(const cJSON *root, const char *path) {
    const cJSON *x = root;
    char buf[512];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok && x; tok = strtok(NULL, ".")) x = cJSON_GetObjectItemCaseSensitive(x, tok);
    return x ? cJSON_PrintUnformatted(x) : strdup("(absent)");
}

// FNV-1a over the eval lines' paths and labels: the same lines, in the same order.
static uint64_t eval_set_hash(const EvalSet *s) {
    uint64_t h = 1469598103934665603ULL;
    for (int64_t i = 0; i < s->n; i++) {
        for (const char *p = s->path[i]; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ULL;
        h = (h ^ 0x1f) * 1099511628211ULL;
        for (const char *p = s->label[i]; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ULL;
        h = (h ^ 0x1e) * 1099511628211ULL;
    }
    return h;
}

// Checks OUT/compare.json against this comparison (refusing a changed leg config, naming the key,
// or another eval set) and writes the current one. A different seed list is fine: the runs of
// the seeds both share are reused, the others trained.
static ocr_status_t check_out_dir(const char *out_dir, const Leg *legs, int nlegs, const EvalSet *set, int64_t max_steps,
                                  uint64_t seed_offset, int is_root) {
    char path[4200];
    snprintf(path, sizeof path, "%s/compare.json", out_dir);
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)eval_set_hash(set));
    cJSON *now = cJSON_CreateObject();
    cJSON *jl = cJSON_AddArrayToObject(now, "legs");
    for (int i = 0; i < nlegs; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", legs[i].name);
        char *json = ocr_config_to_json(legs[i].cfg);
        cJSON_AddItemToObject(o, "config", json ? cJSON_Parse(json) : cJSON_CreateNull());
        free(json);
        cJSON_AddItemToArray(jl, o);
    }
    cJSON_AddStringToObject(now, "eval_lines_fnv1a", hash);
    cJSON_AddNumberToObject(now, "eval_lines", (double)set->n);
    cJSON_AddNumberToObject(now, "max_steps", (double)max_steps);
    cJSON_AddNumberToObject(now, "candidate_seed_offset", (double)seed_offset);
    ocr_status_t st = OCR_OK;
    if (ocr_file_exists(path)) {
        char *text = NULL;
        size_t size;
        st = ocr_read_file(path, &text, &size);
        cJSON *old = st == OCR_OK ? cJSON_Parse(text) : NULL;
        free(text);
        if (st == OCR_OK && !old) st = ocr_set_error(OCR_ERR_FORMAT, "%s is not JSON: remove it or use another --out", path);
        const cJSON *ol = old ? cJSON_GetObjectItemCaseSensitive(old, "legs") : NULL;
        if (st == OCR_OK && cJSON_GetArraySize(ol) != nlegs)
            st = ocr_set_error(OCR_ERR_CONFIG, "%s was made with %d legs, this comparison has %d: use another --out (or remove "
                               "%s to start over)", out_dir, cJSON_GetArraySize(ol), nlegs, path);
        for (int i = 0; st == OCR_OK && i < nlegs; i++) {
            const cJSON *a = cJSON_GetArrayItem(ol, i);
            const cJSON *an = cJSON_GetObjectItemCaseSensitive(a, "name");
            if (!cJSON_IsString(an) || strcmp(an->valuestring, legs[i].name) != 0) {
                st = ocr_set_error(OCR_ERR_CONFIG, "%s was made with leg %d '%s', this comparison's is '%s': use another --out",
                                   out_dir, i + 1, cJSON_IsString(an) ? an->valuestring : "?", legs[i].name);
                break;
            }
            char key[512];
            const cJSON *ac = cJSON_GetObjectItemCaseSensitive(a, "config");
            const cJSON *bc = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(jl, i), "config");
            if (first_difference(ac, bc, "", key, sizeof key)) {
                char *was = value_text(ac, key), *is = value_text(bc, key);
                st = ocr_set_error(OCR_ERR_CONFIG, "%s: the %s runs were trained with %s = %s, this comparison has %s: a "
                                   "resumed comparison must not change the config (use another --out, or remove %s to "
                                   "start over)", out_dir, legs[i].name, key, was ? was : "?", is ? is : "?", path);
                free(was);
                free(is);
            }
        }
        const cJSON *oh = old ? cJSON_GetObjectItemCaseSensitive(old, "eval_lines_fnv1a") : NULL;
        if (st == OCR_OK && (!cJSON_IsString(oh) || strcmp(oh->valuestring, hash) != 0))
            st = ocr_set_error(OCR_ERR_CONFIG, "%s was scored on other eval lines (Eval label files or their contents "
                               "changed): use another --out, or remove %s to start over", out_dir, path);
        const cJSON *oo = old ? cJSON_GetObjectItemCaseSensitive(old, "candidate_seed_offset") : NULL;
        if (st == OCR_OK && (cJSON_IsNumber(oo) ? (uint64_t)oo->valuedouble : 0) != seed_offset)
            st = ocr_set_error(OCR_ERR_CONFIG, "%s was trained with --candidate-seed-offset %llu, this comparison has "
                               "%llu: use another --out", out_dir,
                               cJSON_IsNumber(oo) ? (unsigned long long)oo->valuedouble : 0ULL,
                               (unsigned long long)seed_offset);
        const cJSON *om = old ? cJSON_GetObjectItemCaseSensitive(old, "max_steps") : NULL;
        if (st == OCR_OK && (!cJSON_IsNumber(om) || (int64_t)om->valuedouble != max_steps))
            st = ocr_set_error(OCR_ERR_CONFIG, "%s was trained with --max-steps %lld, this comparison has %lld: use another "
                               "--out", out_dir, cJSON_IsNumber(om) ? (long long)om->valuedouble : -1LL, (long long)max_steps);
        cJSON_Delete(old);
    }
    if (st == OCR_OK && is_root) {
        st = ocr_make_dirs(out_dir);
        char *text = st == OCR_OK ? cJSON_Print(now) : NULL;
        if (st == OCR_OK && !text) st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
        if (st == OCR_OK) st = ocr_write_file_atomic(path, text, strlen(text));
        free(text);
    }
    cJSON_Delete(now);
    return st;
}

// ---- one run's results on disk: run.json (summary), lines.tsv (per line), train_result.bin -------

// The per-line outcome a verdict needs: lines.tsv (Eval), lines_general.tsv (EvalGeneral). The
// general file names its set (the FNV-1a of its lines) in the header, so a changed EvalGeneral is
// rescored rather than read.
#define LINES_HEADER "scored\tcorrect\tedits\tref_chars\tcorrect_exact\tcorrect_nospace"
static ocr_status_t write_lines(const char *dir, const char *name, const EvalLine *lines, int64_t n, const char *set_hash) {
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    fprintf(f, LINES_HEADER "%s%s\n", set_hash ? "\tset=" : "", set_hash ? set_hash : "");
    for (int64_t i = 0; i < n; i++)
        fprintf(f, "%d\t%d\t%d\t%d\t%d\t%d\n", lines[i].scored, lines[i].correct, (int)lines[i].edits,
                (int)lines[i].ref_chars, lines[i].correct_exact, lines[i].correct_nospace);
    fclose(f);
    ocr_status_t st = buf ? ocr_write_file_atomic(path, buf, size) : ocr_set_error(OCR_ERR_OOM, "out of host memory");
    free(buf);
    return st;
}

// *exact_known: the file has the exact / spaces-ignored columns (an earlier build wrote four).
// set_hash non-NULL: the header must name this set (else *stale = 1 and nothing is read).
static ocr_status_t read_lines(const char *dir, const char *name, EvalLine *lines, int64_t n, const char *set_hash,
                               int *exact_known, int *stale) {
    char path[4300];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    *exact_known = 1;
    if (stale) *stale = 0;
    char *text = NULL;
    size_t size;
    OCR_TRY(ocr_read_file(path, &text, &size));
    char *p = strchr(text, '\n');
    if (set_hash) {
        char want[64];
        snprintf(want, sizeof want, "\tset=%s\n", set_hash);
        if (!p || p - text < (ptrdiff_t)strlen(want) - 1 || strncmp(p - (strlen(want) - 1), want, strlen(want)) != 0) {
            *stale = 1;
            free(text);
            return OCR_OK;
        }
    }
    int64_t i = 0;
    ocr_status_t st = OCR_OK;
    while (p && *++p && st == OCR_OK) {
        int sc, co, ed, rf, ex = 0, ns = 0;
        int got = i < n ? sscanf(p, "%d\t%d\t%d\t%d\t%d\t%d", &sc, &co, &ed, &rf, &ex, &ns) : 0;
        if ((got != 4 && got != 6) || sc < 0 || sc > 1 || co < 0 || co > 1 || ed < 0 || rf < 0 || ex < 0 || ex > 1 ||
            ns < 0 || ns > 1) {
            st = ocr_set_error(OCR_ERR_FORMAT, "%s:%lld: not a line of this comparison's eval set", path, (long long)i + 2);
            break;
        }
        if (got == 4) *exact_known = 0;
        lines[i] = (EvalLine){.scored = (uint8_t)sc, .correct = (uint8_t)co, .correct_exact = (uint8_t)ex,
                              .correct_nospace = (uint8_t)ns, .edits = ed, .ref_chars = rf};
        i++;
        p = strchr(p, '\n');
    }
    if (st == OCR_OK && i != n)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s has %lld lines, the eval set %lld", path, (long long)i, (long long)n);
    free(text);
    return st;
}

// The training's result as this build laid it out: a reused run shows its loss curve and figures
// in the report like a fresh one. A file of another build (another layout) is not read (a warning
// says so): the run's scores (run.json, lines.tsv) are still reused.
#define TRAIN_RESULT_MAGIC "ocrtr-v1"
typedef struct {
    char magic[8];
    uint32_t result_size, step_size, eval_size, pad;
    int64_t n_steps, n_evals;
} TrainResultHeader;

static ocr_status_t write_train_result(const char *dir, const TrainResult *r) {
    char path[4300];
    snprintf(path, sizeof path, "%s/train_result.bin", dir);
    TrainResultHeader h = {.result_size = sizeof *r, .step_size = sizeof(StepRecord), .eval_size = sizeof(EvalRecord),
                           .n_steps = r->history.n_steps, .n_evals = r->history.n_evals};
    memcpy(h.magic, TRAIN_RESULT_MAGIC, 8);
    TrainResult flat = *r;
    flat.history.steps = NULL;
    flat.history.evals = NULL;
    OcrAtomicFile af;
    OCR_TRY(ocr_atomic_open(&af, path));
    int ok = fwrite(&h, sizeof h, 1, af.fp) == 1 && fwrite(&flat, sizeof flat, 1, af.fp) == 1 &&
             (r->history.n_steps == 0 || fwrite(r->history.steps, sizeof(StepRecord), (size_t)r->history.n_steps, af.fp) == (size_t)r->history.n_steps) &&
             (r->history.n_evals == 0 || fwrite(r->history.evals, sizeof(EvalRecord), (size_t)r->history.n_evals, af.fp) == (size_t)r->history.n_evals);
    if (!ok) {
        ocr_atomic_abort(&af);
        return ocr_set_error(OCR_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    }
    return ocr_atomic_commit(&af);
}

// 1 read; 0 absent or of another layout; -1 error.
static int read_train_result(const char *dir, TrainResult *r) {
    char path[4300];
    snprintf(path, sizeof path, "%s/train_result.bin", dir);
    if (!ocr_file_exists(path)) return 0;
    char *data = NULL;
    size_t size;
    if (ocr_read_file(path, &data, &size) != OCR_OK) return -1;
    TrainResultHeader h;
    int ok = size >= sizeof h;
    if (ok) memcpy(&h, data, sizeof h);
    ok = ok && memcmp(h.magic, TRAIN_RESULT_MAGIC, 8) == 0 && h.result_size == sizeof *r &&
         h.step_size == sizeof(StepRecord) && h.eval_size == sizeof(EvalRecord) && h.n_steps >= 0 && h.n_evals >= 0 &&
         h.n_steps < (1LL << 40) && h.n_evals < (1LL << 30) &&
         size == sizeof h + sizeof *r + (size_t)h.n_steps * sizeof(StepRecord) + (size_t)h.n_evals * sizeof(EvalRecord);
    if (!ok) {
        free(data);
        return 0;
    }
    memcpy(r, data + sizeof h, sizeof *r);
    r->history.steps = h.n_steps ? malloc((size_t)h.n_steps * sizeof(StepRecord)) : NULL;
    r->history.evals = h.n_evals ? malloc((size_t)h.n_evals * sizeof(EvalRecord)) : NULL;
    if ((h.n_steps && !r->history.steps) || (h.n_evals && !r->history.evals)) {
        free(r->history.steps);
        free(r->history.evals);
        memset(r, 0, sizeof *r);
        free(data);
        ocr_set_error(OCR_ERR_OOM, "out of host memory");
        return -1;
    }
    if (h.n_steps) memcpy(r->history.steps, data + sizeof h + sizeof *r, (size_t)h.n_steps * sizeof(StepRecord));
    if (h.n_evals)
        memcpy(r->history.evals, data + sizeof h + sizeof *r + (size_t)h.n_steps * sizeof(StepRecord),
               (size_t)h.n_evals * sizeof(EvalRecord));
    r->history.n_steps = r->history.cap_steps = h.n_steps;
    r->history.n_evals = r->history.cap_evals = (int)h.n_evals;
    free(data);
    return 1;
}

static const char *const status_names[] = {"ok", "diverged", "failed"};

// A set's scores from its per-line outcomes (as evaluate_set computes them).
typedef struct {
    double acc, acc_exact, acc_nospace, cer;
    int64_t scored;
} LineSums;

static LineSums line_sums(const EvalLine *lines, int64_t n) {
    int64_t scored = 0, co = 0, ex = 0, ns = 0, ed = 0, rf = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!lines[i].scored) continue;
        scored++, co += lines[i].correct, ex += lines[i].correct_exact, ns += lines[i].correct_nospace;
        ed += lines[i].edits, rf += lines[i].ref_chars;
    }
    double d = (double)scored + 1e-5;
    return (LineSums){co / d, ex / d, ns / d, rf > 0 ? (double)ed / (double)rf : (double)ed, scored};
}

static ocr_status_t write_run_json(const char *dir, const char *leg, const ReportSeedRun *s) {
    char path[4300];
    snprintf(path, sizeof path, "%s/run.json", dir);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "leg", leg);
    cJSON_AddNumberToObject(o, "seed", (double)s->seed);
    cJSON_AddStringToObject(o, "status", status_names[s->status]);
    cJSON_AddStringToObject(o, "error", s->error);
    cJSON_AddNumberToObject(o, "accuracy", s->acc);
    cJSON_AddNumberToObject(o, "cer", s->cer);
    cJSON_AddNumberToObject(o, "norm_edit_distance", s->norm_edit_dis);
    if (isfinite(s->acc_exact)) cJSON_AddNumberToObject(o, "accuracy_exact", s->acc_exact);
    if (isfinite(s->acc_nospace)) cJSON_AddNumberToObject(o, "accuracy_nospace", s->acc_nospace);
    cJSON_AddNumberToObject(o, "samples_per_s", s->samples_per_s);
    if (isfinite(s->final_loss)) cJSON_AddNumberToObject(o, "final_loss", s->final_loss);
    else cJSON_AddNullToObject(o, "final_loss");
    cJSON_AddNumberToObject(o, "peak_bytes", (double)s->peak_bytes);
    cJSON_AddNumberToObject(o, "skipped_steps", (double)s->skipped_steps);
    cJSON_AddNumberToObject(o, "recomputed_steps", (double)s->recomputed_steps);
    cJSON_AddNumberToObject(o, "steps", (double)s->steps);
    cJSON_AddNumberToObject(o, "eval_lines", (double)s->eval_lines);
    char *text = cJSON_Print(o);
    cJSON_Delete(o);
    if (!text) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_status_t st = ocr_write_file_atomic(path, text, strlen(text));
    free(text);
    return st;
}

static double num(const cJSON *o, const char *k, double def) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(x) ? x->valuedouble : def;
}

// *found = 1: a finished run was read into s (and lines); 0: none there (train it).
static ocr_status_t read_run(const char *dir, const char *leg, uint64_t seed, ReportSeedRun *s, EvalLine *lines, int64_t n,
                             int *found) {
    char path[4300];
    *found = 0;
    snprintf(path, sizeof path, "%s/run.json", dir);
    if (!ocr_file_exists(path)) return OCR_OK;
    char *text = NULL;
    size_t size;
    OCR_TRY(ocr_read_file(path, &text, &size));
    cJSON *o = cJSON_Parse(text);
    free(text);
    const cJSON *jl = cJSON_GetObjectItemCaseSensitive(o, "leg"), *js = cJSON_GetObjectItemCaseSensitive(o, "status");
    if (!o || !cJSON_IsString(jl) || strcmp(jl->valuestring, leg) != 0 || (uint64_t)num(o, "seed", -1) != seed ||
        !cJSON_IsString(js)) {
        cJSON_Delete(o);
        return ocr_set_error(OCR_ERR_FORMAT, "%s is not the run of %s at seed %llu: remove it to retrain that run", path,
                             leg, (unsigned long long)seed);
    }
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->status = strcmp(js->valuestring, "diverged") == 0 ? REPORT_SEED_DIVERGED : REPORT_SEED_OK;
    const cJSON *je = cJSON_GetObjectItemCaseSensitive(o, "error");
    if (cJSON_IsString(je)) snprintf(s->error, sizeof s->error, "%s", je->valuestring);
    s->acc = num(o, "accuracy", 0);
    s->cer = num(o, "cer", 0);
    s->norm_edit_dis = num(o, "norm_edit_distance", 0);
    s->samples_per_s = num(o, "samples_per_s", 0);
    s->final_loss = num(o, "final_loss", NAN);
    s->peak_bytes = (int64_t)num(o, "peak_bytes", 0);
    s->skipped_steps = (int64_t)num(o, "skipped_steps", 0);
    s->recomputed_steps = (int64_t)num(o, "recomputed_steps", 0);
    s->steps = (int64_t)num(o, "steps", 0);
    s->eval_lines = (int64_t)num(o, "eval_lines", 0);
    s->reused = 1;
    cJSON_Delete(o);
    int exact_known;
    OCR_TRY(read_lines(dir, "lines.tsv", lines, n, NULL, &exact_known, NULL));
    LineSums sums = line_sums(lines, n);
    s->acc_exact = exact_known ? sums.acc_exact : NAN;
    s->acc_nospace = exact_known ? sums.acc_nospace : NAN;
    *found = 1;
    return OCR_OK;
}

// ---- the comparison ------------------------------------------------------------------------------

static const char *backbone_name(const OcrArch *a) {
    return a->backbone == OCR_BACKBONE_MV1E      ? "MobileNetV1Enhance"
           : a->backbone == OCR_BACKBONE_LCNETV3 ? "PPLCNetV3"
           : a->backbone == OCR_BACKBONE_LCNETV4 ? "PPLCNetV4"
           : a->backbone == OCR_BACKBONE_HGNETV2 ? "PPHGNetV2_B4"
                                                 : "SVTRNet";
}

static ocr_status_t model_facts(Report *rep, const OcrConfig *cfg, const RunConfig *rc) {
    OcrModel *m = NULL;
    OCR_TRY(ocr_model_from_config(&m, cfg));
    OcrTransformList tl;
    ocr_status_t st = ocr_transforms_parse(&tl, cfg, "Train.dataset.transforms", rc->max_text_length);
    OcrMemPlan plan;
    if (st == OCR_OK) st = ocr_model_plan(m, 1, tl.resize_h, tl.resize_w, 0, &plan);
    if (st == OCR_OK) {
        const OcrArch *a = ocr_model_arch(m);
        snprintf(rep->algorithm, sizeof rep->algorithm, "%s", a->algorithm);
        snprintf(rep->backbone, sizeof rep->backbone, "%s", backbone_name(a));
        rep->params = ocr_model_param_count(m);
        rep->in_channels = tl.channels;
        rep->height = tl.resize_h;
        rep->width = tl.resize_w;
        rep->seq_len = plan.seq_len;
        rep->classes = plan.classes;
    }
    ocr_model_free(m);
    return st;
}

// The general set (EvalGeneral), when the config has one: its lines, loader config and the
// FNV-1a that names it in every run's lines_general.tsv.
typedef struct {
    int present;
    EvalSet set;
    OcrLoaderConfig lc;
    char hash[32];
} GeneralSet;

// Scores the general set with a loaded model into s (and lines, paths when given).
static ocr_status_t score_general(const GeneralSet *gs, InferModel *im, const OcrDict *dict, const RunConfig *rc,
                                  ReportSeedRun *s, EvalLine *lines, EvalPaths *paths) {
    EvalOptions eo;
    EvalResult er;
    eval_options_from_loader(&eo, &gs->lc, im->m, (RecMetricOptions){rc->ignore_space, rc->is_filter});
    OCR_TRY(evaluate_set(im->m, &gs->set, dict, &eo, &er, lines));
    s->has_general = 1;
    s->general_acc = er.acc;
    s->general_acc_exact = er.acc_exact;
    s->general_acc_nospace = er.acc_nospace;
    s->general_cer = er.cer;
    s->general_lines = er.samples;
    if (paths && paths->lines == 0) *paths = er.paths;
    return OCR_OK;
}

// The configured start (Global.pretrained_model), scored in FP32 on the same lines before any
// run trains (and on the general set): the report shows what training did as well as what the
// change did.
static ocr_status_t score_start(Report *rep, const OcrConfig *cfg, const RunConfig *rc, const EvalSet *set,
                                const OcrDict *dict, const OcrLoaderConfig *elc, const GeneralSet *gs, const char *dev,
                                FILE *progress) {
    InferModel im = {0};
    EvalResult er;
    ReportSeedRun g = {0};
    ocr_status_t st = infer_model_load(&im, cfg, rc->pretrained_model, 0, dev);
    if (st == OCR_OK) {
        EvalOptions eo;
        eval_options_from_loader(&eo, elc, im.m, (RecMetricOptions){rc->ignore_space, rc->is_filter});
        st = evaluate_set(im.m, set, dict, &eo, &er, NULL);
    }
    if (st == OCR_OK && gs->present) st = score_general(gs, &im, dict, rc, &g, NULL, NULL);
    infer_model_free(&im);
    if (st != OCR_OK) return ocr_wrap_error(st, "Global.pretrained_model (evaluated before training)");
    rep->has_start = 1;
    snprintf(rep->start_weights, sizeof rep->start_weights, "%s", rc->pretrained_model);
    rep->start_acc = er.acc;
    rep->start_cer = er.cer;
    rep->start_norm_edit_dis = er.norm_edit_dis;
    rep->start_acc_exact = er.acc_exact;
    rep->start_acc_nospace = er.acc_nospace;
    rep->start_samples = er.samples;
    rep->start_general_acc = g.general_acc;
    rep->start_general_acc_exact = g.general_acc_exact;
    rep->start_general_acc_nospace = g.general_acc_nospace;
    rep->start_general_cer = g.general_cer;
    if (progress)
        fprintf(progress, "pretrained %s before training: accuracy %.4f, CER %.4f on %lld eval lines\n", rc->pretrained_model,
                er.acc, er.cer, (long long)er.samples);
    if (progress && gs->present)
        fprintf(progress, "pretrained %s on the general set: accuracy %.4f (exact %.4f), CER %.4f on %lld lines\n",
                rc->pretrained_model, g.general_acc, g.general_acc_exact, g.general_cer, (long long)g.general_lines);
    return OCR_OK;
}

// A reused run without the general set's lines (trained before EvalGeneral was added, or on
// another general set): its final weights (save_model_dir/latest) are scored now; without them
// the run must be trained again.
static ocr_status_t general_for_reused(const Leg *g, uint64_t seed, const char *dir, const GeneralSet *gs,
                                       const OcrDict *dict, const char *dev, ReportSeedRun *s, EvalLine *lines) {
    int exact_known, stale = 0;
    char path[4300];
    snprintf(path, sizeof path, "%s/lines_general.tsv", dir);
    if (ocr_file_exists(path)) {
        OCR_TRY(read_lines(dir, "lines_general.tsv", lines, gs->set.n, gs->hash, &exact_known, &stale));
        if (!stale) {
            LineSums m = line_sums(lines, gs->set.n);
            s->has_general = 1;
            s->general_acc = m.acc;
            s->general_acc_exact = m.acc_exact;
            s->general_acc_nospace = m.acc_nospace;
            s->general_cer = m.cer;
            s->general_lines = m.scored;
            return OCR_OK;
        }
    }
    if (s->status == REPORT_SEED_FAILED) return OCR_OK;
    char wpath[4400];
    snprintf(wpath, sizeof wpath, "%s/latest/model.safetensors", dir);
    if (!ocr_file_exists(wpath))
        return ocr_set_error(OCR_ERR_NOT_FOUND, "%s was trained without this EvalGeneral set and its final weights "
                             "(%s) are gone: remove %s/run.json to train that run again", dir, wpath, dir);
    OcrConfig *cfg = NULL;
    RunConfig rc;
    OCR_TRY(seed_config(&cfg, &rc, g, seed, dir));
    snprintf(wpath, sizeof wpath, "%s/latest", dir);
    InferModel im = {0};
    ocr_status_t st = infer_model_load(&im, cfg, wpath, 1, dev);
    if (st == OCR_OK) st = score_general(gs, &im, dict, &rc, s, lines, NULL);
    infer_model_free(&im);
    ocr_config_free(cfg);
    if (st == OCR_OK && ocr_dist_detect_world().rank == 0) st = write_lines(dir, "lines_general.tsv", lines, gs->set.n, gs->hash);
    if (st != OCR_OK) return ocr_wrap_error(st, "%s: scoring the general set (EvalGeneral) with the run's final weights", dir);
    ocr_log(OCR_LOG_INFO, "%s: the general set (EvalGeneral) scored from the saved final weights", dir);
    return OCR_OK;
}

// Trains one run and scores its final weights line by line. A training or scoring error is the
// run's (status FAILED with the message), not the comparison's: the caller goes on.
static void train_one(const Leg *g, uint64_t seed, const char *dir, const CompareOptions *o,
                      const EvalSet *set, const OcrDict *dict, const OcrLoaderConfig *elc, const GeneralSet *gs,
                      const char *dev, const RunConfig *base_rc, ReportSeedRun *s, EvalLine *lines,
                      EvalLine *glines, TrainResult *keep, int *kept, EvalPaths *paths, EvalPaths *gpaths) {
    memset(s, 0, sizeof *s);
    s->seed = seed;
    s->final_loss = NAN;
    OcrConfig *cfg = NULL;
    RunConfig rc;
    TrainResult r = {0};
    ocr_status_t st = seed_config(&cfg, &rc, g, seed, dir);
    if (st == OCR_OK) {
        TrainOptions opt = {0};
        char label[64];
        snprintf(label, sizeof label, o->n_seeds > 1 ? "%s s%llu" : "%s", g->name, (unsigned long long)seed);
        opt.label = label;
        opt.progress = o->progress;
        opt.max_iters = o->max_steps;
        opt.final_eval = 0;  // scored below, per line, from the final checkpoint
        opt.skip_general = 1;  // the same for the general set
        opt.save_checkpoints = 1;
        opt.lr_scale = g->batch > 0 ? (double)g->batch / (double)base_rc->train.batch_size : 1.0;
        st = train_run(cfg, &rc, &opt, &r);
    }
    if (st == OCR_OK) {
        s->samples_per_s = r.throughput.samples_per_s;
        s->final_loss = r.outcome.final_loss;
        s->peak_bytes = r.memory.stats.peak_total;
        s->skipped_steps = r.amp.skipped_steps;
        s->recomputed_steps = r.amp.recomputed_steps;
        s->steps = r.history.n_steps;
        // The final weights (save_model_dir/latest) under the run's precision.
        char wpath[4400];
        snprintf(wpath, sizeof wpath, "%s/latest", dir);
        InferModel im = {0};
        EvalResult er;
        st = infer_model_load(&im, cfg, wpath, 1, dev);
        if (st == OCR_OK) {
            EvalOptions eo;
            eval_options_from_loader(&eo, elc, im.m, (RecMetricOptions){rc.ignore_space, rc.is_filter});
            st = evaluate_set(im.m, set, dict, &eo, &er, lines);
        }
        if (st == OCR_OK && gs->present) st = score_general(gs, &im, dict, &rc, s, glines, gpaths);
        infer_model_free(&im);
        if (st == OCR_OK) {
            s->acc = er.acc;
            s->acc_exact = er.acc_exact;
            s->acc_nospace = er.acc_nospace;
            s->cer = er.cer;
            s->norm_edit_dis = er.norm_edit_dis;
            s->eval_lines = er.samples;
            r.outcome.has_final_eval = 1;
            r.outcome.acc = er.acc;
            r.outcome.norm_edit_dis = er.norm_edit_dis;
            r.outcome.cer = er.cer;
            r.outcome.eval_samples = er.samples;
            r.outcome.eval_samples_per_s = er.samples_per_s;
            if (paths && paths->lines == 0) *paths = er.paths;
        }
    }
    if (st != OCR_OK) {
        s->status = REPORT_SEED_FAILED;
        snprintf(s->error, sizeof s->error, "%s", ocr_last_error());
        train_result_free(&r);
    } else {
        // Diverged: the loss left the finite numbers (an FP16 overflow that the scaler did not catch,
        // a learning rate too high) or no step updated the weights.
        if (!isfinite(s->final_loss) || (s->steps > 0 && s->skipped_steps >= s->steps)) {
            s->status = REPORT_SEED_DIVERGED;
            snprintf(s->error, sizeof s->error, !isfinite(s->final_loss) ? "the training loss is not finite at the end"
                                                                          : "every step was skipped (overflow)");
        }
        ocr_status_t ws = OCR_OK;
        if (ocr_dist_detect_world().rank == 0) {
            ws = write_lines(dir, "lines.tsv", lines, set->n, NULL);
            if (ws == OCR_OK && gs->present) ws = write_lines(dir, "lines_general.tsv", glines, gs->set.n, gs->hash);
            if (ws == OCR_OK) ws = write_train_result(dir, &r);
            if (ws == OCR_OK) ws = write_run_json(dir, g->name, s);  // last: its presence marks a finished run
            if (ws != OCR_OK)
                ocr_log(OCR_LOG_WARN, "%s: the run's results could not be saved for a resumed comparison: %s", dir,
                        ocr_last_error());
        }
        if (!*kept) {
            *keep = r;
            *kept = 1;
        } else {
            train_result_free(&r);
        }
    }
    if (cfg) ocr_config_free(cfg);
}

ocr_status_t compare_default_memory(const RunConfig *rc, int64_t *memory) {
    char dev[32];
    OCR_TRY(training_resolve_device(rc->device_name, dev, sizeof dev));
    // 90 % of a GPU's free memory: the CUDA context's growth and the libraries' handles, which
    // the tracker does not see, take the rest.
    *memory = (int64_t)((double)capacity_default_budget(dev) * 0.9);
    if (*memory == 0) return ocr_set_error(OCR_ERR_INVALID_ARG, "--batch max needs --memory SIZE on the CPU");
    return OCR_OK;
}

void compare_report_free(Report *rep) {
    if (!rep) return;
    for (int i = 0; i < rep->n_runs; i++) train_result_free(&rep->runs[i].r);
}

ocr_status_t compare_run(const OcrConfig *cfg, const RunConfig *rc, const CompareOptions *o, Report *rep) {
    if (o->n_seeds < 1 || o->n_seeds > COMPARE_MAX_SEEDS)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--seeds: %d seeds, 1 to %d", o->n_seeds, COMPARE_MAX_SEEDS);
    for (int i = 0; i < o->n_seeds; i++)
        for (int j = 0; j < i; j++)
            if (o->seeds[i] == o->seeds[j])
                return ocr_set_error(OCR_ERR_INVALID_ARG, "--seeds: seed %llu is listed twice", (unsigned long long)o->seeds[i]);
    if (o->batch_max && o->memory <= 0) return ocr_set_error(OCR_ERR_INVALID_ARG, "--batch max needs --memory SIZE");
    if (o->candidate_seed_offset > 0 && !o->candidate)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "--candidate-seed-offset needs --candidate CFG2");
    char dev[32];
    OCR_TRY(training_resolve_device(rc->device_name, dev, sizeof dev));

    // The legs and each one's config, all validated before anything is trained or written.
    Leg legs[REPORT_MAX_RUNS];
    memset(legs, 0, sizeof legs);
    int nlegs = 0;
    ocr_status_t st = make_legs(cfg, o, legs, &nlegs);
    RunConfig cand_rc;
    if (st == OCR_OK && o->candidate) {
        st = run_config_read(&cand_rc, o->candidate, RUN_NEED_TRAIN | RUN_NEED_EVAL);
        if (st != OCR_OK) st = ocr_wrap_error(st, "the candidate config %s", o->candidate_path ? o->candidate_path : "");
        if (st == OCR_OK && (strcmp(cand_rc.dict_path, rc->dict_path) != 0 || cand_rc.use_space_char != rc->use_space_char))
            ocr_log(OCR_LOG_WARN, "the candidate's dictionary (%s) is not the baseline's (%s): both are scored on the "
                    "same lines, each with its own dictionary", cand_rc.dict_path, rc->dict_path);
    }
    for (int i = 0; i < nlegs && st == OCR_OK; i++) {
        legs[i].batch = o->batch_fixed;
        if (o->batch_max) {
            char pname[16];
            snprintf(pname, sizeof pname, "%.15s", legs[i].level ? legs[i].name : "fp32");
            st = plan_batch(legs[i].source, pname, o->memory, &legs[i].batch);
        }
        if (st == OCR_OK) st = leg_config(&legs[i]);
        if (st != OCR_OK) st = ocr_wrap_error(st, "leg %s", legs[i].name);
    }
    if (st == OCR_OK) st = model_facts(rep, cfg, rc);

    // The eval lines every run is scored on, and OUT's earlier configuration.
    OcrDict dict;
    OcrLoaderConfig elc;
    EvalSet set = {0};
    int dict_ok = 0, elc_ok = 0;
    if (st == OCR_OK) {
        st = ocr_dict_load(&dict, rc->dict_path, rc->use_space_char);
        dict_ok = st == OCR_OK;
    }
    if (st == OCR_OK) {
        st = ocr_loader_config_parse(&elc, cfg, "Eval");
        elc_ok = st == OCR_OK;
    }
    if (st == OCR_OK) st = eval_set_read(&set, &elc);
    GeneralSet gs = {0};
    int gs_lc_ok = 0;
    if (st == OCR_OK && rc->eval_general.present) {
        st = ocr_loader_config_parse(&gs.lc, cfg, "EvalGeneral");
        gs_lc_ok = st == OCR_OK;
        if (st == OCR_OK) st = eval_set_read(&gs.set, &gs.lc);
        gs.present = st == OCR_OK;
        snprintf(gs.hash, sizeof gs.hash, "%016llx", (unsigned long long)eval_set_hash(&gs.set));
    }
    // Under mpirun every rank trains each run (data parallel) and scores its final weights (the
    // same work on every rank, so no rank waits in the next run's collectives for rank 0's
    // evaluation); rank 0 alone prints and writes.
    const int is_root = ocr_dist_detect_world().rank == 0;
    FILE *progress = is_root ? o->progress : NULL;
    if (st == OCR_OK) st = check_out_dir(o->out_dir, legs, nlegs, &set, o->max_steps, o->candidate_seed_offset, is_root);

    // The report's header.
    if (st == OCR_OK) {
        rep->config_path = o->config_path;
        snprintf(rep->command, sizeof rep->command, "%s", o->command ? o->command : "");
        time_t now = time(NULL);
        strftime(rep->created_utc, sizeof rep->created_utc, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
        rep->version = training_version();
        rep->tolerance = rc->accuracy_tolerance;
        rep->cer_tolerance = rc->cer_tolerance;
        rep->bootstrap_seed = rc->seed;
        rep->batch_max = o->batch_max;
        rep->memory_bytes = o->memory;
        rep->epochs = rc->epoch_num;
        rep->seed = o->seeds[0];
        rep->n_seeds = o->n_seeds;
        memcpy(rep->seeds, o->seeds, sizeof(uint64_t) * (size_t)o->n_seeds);
        rep->assumed_seed_sd = o->assumed_seed_sd;
        rep->candidate_mode = o->candidate != NULL;
        if (o->candidate_path) snprintf(rep->candidate_path, sizeof rep->candidate_path, "%s", o->candidate_path);
        rep->threads = rc->threads;
        if (rep->threads == 0) rep->threads = omp_get_max_threads();
        snprintf(rep->device, sizeof rep->device, "%s", dev);
        for (int i = 0; i < nlegs; i++) snprintf(rep->runs[i].name, sizeof rep->runs[i].name, "%.31s", legs[i].name);
        rep->n_runs = nlegs;
    }
    if (st == OCR_OK) {
        rep->has_general = gs.present;
        rep->general_samples = gs.set.n;
    }
    if (st == OCR_OK && rc->pretrained_model) st = score_start(rep, cfg, rc, &set, &dict, &elc, &gs, dev, progress);

    // lines[leg][seed]: every run's per-line outcome, for the verdict.
    EvalLine *lines[REPORT_MAX_RUNS][COMPARE_MAX_SEEDS], *glines[REPORT_MAX_RUNS][COMPARE_MAX_SEEDS];
    memset(lines, 0, sizeof lines);
    memset(glines, 0, sizeof glines);
    for (int i = 0; i < nlegs && st == OCR_OK; i++)
        for (int k = 0; k < o->n_seeds && st == OCR_OK; k++) {
            lines[i][k] = calloc((size_t)(set.n ? set.n : 1), sizeof(EvalLine));
            glines[i][k] = calloc((size_t)(gs.set.n ? gs.set.n : 1), sizeof(EvalLine));
            if (!lines[i][k] || !glines[i][k])
                st = ocr_set_error(OCR_ERR_OOM, "out of host memory for %lld eval lines", (long long)set.n);
        }
    int kept[REPORT_MAX_RUNS] = {0};
    int total = nlegs * o->n_seeds, done = 0;
    for (int k = 0; k < o->n_seeds && st == OCR_OK; k++) {
        for (int i = 0; i < nlegs && st == OCR_OK; i++) {
            ReportRun *run = &rep->runs[i];
            ReportSeedRun *s = &run->seeds[k];
            char dir[4200];
            snprintf(dir, sizeof dir, "%.4096s/runs/%.31s/seed-%llu", o->out_dir, legs[i].name, (unsigned long long)o->seeds[k]);
            done++;
            int got = 0;
            st = read_run(dir, legs[i].name, o->seeds[k] + (i > 0 ? o->candidate_seed_offset : 0), s, lines[i][k], set.n,
                          &got);
            if (st != OCR_OK) break;
            if (got && gs.present) {
                st = general_for_reused(&legs[i], o->seeds[k] + (i > 0 ? o->candidate_seed_offset : 0), dir, &gs, &dict,
                                        dev, s, glines[i][k]);
                if (st != OCR_OK) break;
            }
            if (got) {
                if (!kept[i]) {
                    TrainResult r = {0};
                    int rr = read_train_result(dir, &r);
                    if (rr == 1) {
                        run->r = r;
                        kept[i] = 1;
                    } else {
                        // The scores and the verdict do not need it; the report's training figures do.
                        ocr_log(OCR_LOG_WARN, "%s/train_result.bin %s: the report keeps this run's scores and "
                                "seed figures, and takes its training history from another seed of %s if one has it",
                                dir, rr == 0 ? "is missing or from another build's layout" : "cannot be read",
                                legs[i].name);
                    }
                }
                if (progress)
                    fprintf(progress, "== run %d/%d: %s seed %llu: reused (%s: accuracy %.4f) ==\n", done, total,
                            legs[i].name, (unsigned long long)o->seeds[k], dir, s->acc);
                continue;
            }
            if (progress)
                fprintf(progress, "== run %d/%d: %s seed %llu (batch %d) ==\n", done, total, legs[i].name,
                        (unsigned long long)o->seeds[k], legs[i].batch > 0 ? legs[i].batch : legs[i].rc.train.batch_size);
            train_one(&legs[i], o->seeds[k] + (i > 0 ? o->candidate_seed_offset : 0), dir, o, &set, &dict, &elc, &gs, dev,
                      rc, s, lines[i][k], glines[i][k], &run->r, &kept[i], &run->eval_paths, &run->general_paths);
            if (progress) {
                if (s->status == REPORT_SEED_FAILED)
                    fprintf(progress, "%s seed %llu: FAILED: %s\n", legs[i].name, (unsigned long long)o->seeds[k], s->error);
                else
                    fprintf(progress, "%s seed %llu: accuracy %.4f, CER %.4f, %.1f samples/s, peak memory %.1f MiB, %lld "
                            "skipped steps, %lld recomputed%s%s\n", legs[i].name, (unsigned long long)o->seeds[k], s->acc, s->cer,
                            s->samples_per_s, (double)s->peak_bytes / 1048576.0, (long long)s->skipped_steps,
                            (long long)s->recomputed_steps,
                            s->status == REPORT_SEED_DIVERGED ? "; DIVERGED: " : "",
                            s->status == REPORT_SEED_DIVERGED ? s->error : "");
                if (s->status != REPORT_SEED_FAILED && s->has_general)
                    fprintf(progress, "%s seed %llu: general set (EvalGeneral) accuracy %.4f (exact %.4f, spaces ignored "
                            "%.4f), CER %.4f\n", legs[i].name, (unsigned long long)o->seeds[k], s->general_acc,
                            s->general_acc_exact, s->general_acc_nospace, s->general_cer);
            }
            if (i == 0 && k == 0 && progress && run->general_paths.lines > 0) {
                char sum[1024];
                eval_paths_summary(&run->general_paths, sum, sizeof sum);
                ocr_log(OCR_LOG_INFO, "EvalGeneral: %s", sum);
                ocr_skip_stats_log(&run->general_paths.skipped, "EvalGeneral lines");
            }
            if (i == 0 && k == 0 && progress && run->eval_paths.lines > 0) {
                char sum[1024];
                eval_paths_summary(&run->eval_paths, sum, sizeof sum);
                ocr_log(OCR_LOG_INFO, "Eval: %s", sum);
                ocr_skip_stats_log(&run->eval_paths.skipped, "Eval lines");
            }
        }
    }
    if (st == OCR_OK) {
        for (int i = 0; i < nlegs; i++) {
            ReportRun *run = &rep->runs[i];
            run->n_seeds = o->n_seeds;
            run->base_lr = legs[i].rc.optim.lr.learning_rate *
                           (legs[i].batch > 0 ? (double)legs[i].batch / (double)rc->train.batch_size : 1.0);
            // A leg none of whose runs finished still shows its seeds (with their errors).
            if (!kept[i]) run->r.config.batch_size = legs[i].batch > 0 ? legs[i].batch : legs[i].rc.train.batch_size;
            for (int k = 0; k < o->n_seeds; k++)
                if (run->seeds[k].status != REPORT_SEED_FAILED) {
                    rep->eval_samples = run->seeds[k].eval_lines;
                    break;
                }
            if (kept[i]) rep->train_samples = run->r.config.train_samples;
        }
        st = report_judge(rep, lines, set.n);
        if (st == OCR_OK && gs.present) st = report_judge_general(rep, glines, gs.set.n);
    }
    for (int i = 0; i < nlegs; i++)
        for (int k = 0; k < o->n_seeds; k++)
            if (lines[i][k]) {
                eval_lines_free(lines[i][k], set.n);
                free(lines[i][k]);
            }
    for (int i = 0; i < nlegs; i++)
        for (int k = 0; k < o->n_seeds; k++)
            if (glines[i][k]) {
                eval_lines_free(glines[i][k], gs.set.n);
                free(glines[i][k]);
            }
    eval_set_free(&gs.set);
    if (gs_lc_ok) ocr_loader_config_free(&gs.lc);
    eval_set_free(&set);
    if (elc_ok) ocr_loader_config_free(&elc);
    if (dict_ok) ocr_dict_free(&dict);
    for (int i = 0; i < nlegs; i++)
        if (legs[i].cfg) ocr_config_free(legs[i].cfg);
    return st;
}

// ---- two trained models --------------------------------------------------------------------------

ocr_status_t compare_models(const OcrConfig *cfg, const RunConfig *rc, const char *baseline_weights,
                            const char *candidate_weights, int with_amp, FILE *progress, Report *rep) {
    char dev[32];
    OCR_TRY(training_resolve_device(rc->device_name, dev, sizeof dev));
    OcrDict dict;
    OCR_TRY(ocr_dict_load(&dict, rc->dict_path, rc->use_space_char));
    OcrLoaderConfig elc;
    ocr_status_t st = ocr_loader_config_parse(&elc, cfg, "Eval");
    if (st != OCR_OK) {
        ocr_dict_free(&dict);
        return st;
    }
    EvalSet set = {0};
    st = eval_set_read(&set, &elc);
    EvalLine *lines[REPORT_MAX_RUNS][REPORT_MAX_SEEDS];
    memset(lines, 0, sizeof lines);
    const char *weights[2] = {baseline_weights, candidate_weights}, *names[2] = {"baseline", "candidate"};
    if (st == OCR_OK) st = model_facts(rep, cfg, rc);
    for (int i = 0; i < 2 && st == OCR_OK; i++) {
        ReportRun *run = &rep->runs[i];
        snprintf(run->name, sizeof run->name, "%s", names[i]);
        run->n_seeds = 1;
        lines[i][0] = calloc((size_t)(set.n ? set.n : 1), sizeof(EvalLine));
        if (!lines[i][0]) {
            st = ocr_set_error(OCR_ERR_OOM, "out of host memory for %lld eval lines", (long long)set.n);
            break;
        }
        InferModel im = {0};
        EvalResult er;
        st = infer_model_load(&im, cfg, weights[i], with_amp, dev);
        if (st == OCR_OK) {
            EvalOptions eo;
            eval_options_from_loader(&eo, &elc, im.m, (RecMetricOptions){rc->ignore_space, rc->is_filter});
            st = evaluate_set(im.m, &set, &dict, &eo, &er, lines[i][0]);
        }
        infer_model_free(&im);
        if (st != OCR_OK) {
            st = ocr_wrap_error(st, "%s weights %s", names[i], weights[i]);
            break;
        }
        ReportSeedRun *sr = &run->seeds[0];
        sr->seed = rc->seed;
        sr->acc = er.acc;
        sr->acc_exact = er.acc_exact;
        sr->acc_nospace = er.acc_nospace;
        sr->cer = er.cer;
        sr->norm_edit_dis = er.norm_edit_dis;
        sr->eval_lines = er.samples;
        sr->final_loss = NAN;
        run->r.outcome.has_final_eval = 1;
        run->r.outcome.acc = er.acc;
        run->r.outcome.cer = er.cer;
        run->r.outcome.norm_edit_dis = er.norm_edit_dis;
        run->r.outcome.eval_samples = er.samples;
        run->r.outcome.eval_samples_per_s = er.samples_per_s;
        run->eval_paths = er.paths;
        rep->eval_samples = er.samples;
        if (progress)
            fprintf(progress, "%s %s: accuracy %.4f, CER %.4f on %lld lines\n", names[i], weights[i], er.acc, er.cer,
                    (long long)er.samples);
    }
    if (st == OCR_OK) {
        rep->n_runs = 2;
        rep->candidate_mode = 1;
        snprintf(rep->candidate_path, sizeof rep->candidate_path, "%s", candidate_weights);
        rep->n_seeds = 1;
        rep->seeds[0] = rc->seed;
        rep->tolerance = rc->accuracy_tolerance;
        rep->cer_tolerance = rc->cer_tolerance;
        rep->bootstrap_seed = rc->seed;
        rep->version = training_version();
        // Fixed models: the per-line verdict alone (no training noise to allow for).
        st = report_pair(&rep->runs[1].paired, lines[0][0], lines[1][0], set.n, rc->accuracy_tolerance,
                         rc->cer_tolerance, rc->seed);
    }
    for (int i = 0; i < 2; i++)
        if (lines[i][0]) {
            eval_lines_free(lines[i][0], set.n);
            free(lines[i][0]);
        }
    eval_set_free(&set);
    ocr_loader_config_free(&elc);
    ocr_dict_free(&dict);
    return st;
}
