#include "training/checkpoint.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"
#include "core/safetensors.h"
#include "data/dict.h"
#include "kernels/ops.h"
#include "models/head_remap.h"
#include "models/pdparams.h"
#include "models/weights_names.h"

// dir + "/" + name into out; 0 when it does not fit (the caller reports it).
static int path_join(char *out, size_t cap, const char *dir, const char *name) {
    int n = snprintf(out, cap, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < cap;
}

// state.json first: a directory whose removal a kill interrupts never looks like a checkpoint
// (ckpt_resolve goes by state.json). model.dict.txt: the dictionary the head was trained with
// (the sidecar name of model.safetensors, see weights_dict_path).
static const char *const CKPT_FILES[] = {"state.json", "model.safetensors", "optimizer.safetensors", "model.dict.txt",
                                         NULL};
// A network trained beside the model (CkptCompanion) writes "companion.<name>.optimizer.safetensors"
// and "companion.<name>.state.json": every file of that prefix is a checkpoint's own.
#define CKPT_COMPANION_PREFIX "companion."

static int is_dir(const char *p) {
    struct stat s;
    return stat(p, &s) == 0 && S_ISDIR(s.st_mode);
}

// Removes a checkpoint directory: its files, then the atomic-write temporaries a killed writer
// left ("<file>.tmp.<pid>"; without this "<dir>.tmp" could never be removed and each kill would
// leave a checkpoint's worth of bytes behind). Nothing else is touched.
static void remove_ckpt_dir(const char *dir) {
    char p[4096];
    for (int i = 0; CKPT_FILES[i]; i++) {
        if (path_join(p, sizeof p, dir, CKPT_FILES[i])) unlink(p);
    }
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (strncmp(e->d_name, CKPT_COMPANION_PREFIX, strlen(CKPT_COMPANION_PREFIX)) == 0 &&
                path_join(p, sizeof p, dir, e->d_name))
                unlink(p);
            for (int i = 0; CKPT_FILES[i]; i++) {
                size_t n = strlen(CKPT_FILES[i]);
                if (strncmp(e->d_name, CKPT_FILES[i], n) == 0 && strncmp(e->d_name + n, ".tmp.", 5) == 0 &&
                    path_join(p, sizeof p, dir, e->d_name))
                    unlink(p);
            }
        }
        closedir(d);
    }
    rmdir(dir);
}

static void sync_parent(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    char *slash = strrchr(p, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(p, sizeof p, ".");
    int fd = open(p[0] ? p : "/", O_RDONLY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

// ---- writing ----------------------------------------------------------------------------------

// masters_here: under O2 the f32 masters are written here ("master.<name>", a companion's: its
// weights file holds the working copy) instead of the working copy ("working.<name>", the model's:
// its weights file holds the masters).
static ocr_status_t save_optimizer(const char *path, const Optimizer *opt, AmpEngine *amp, const OcrParamTable *t,
                                   int masters_here) {
    int n = t->count;
    OcrNamedTensor *ts = calloc((size_t)(3 * n + 1), sizeof *ts);
    char **names = calloc((size_t)(3 * n + 1), sizeof *names);
    void **host = calloc((size_t)(3 * n + 1), sizeof *host);
    if (!ts || !names || !host) {
        free(ts);
        free(names);
        free(host);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    int k = 0;
    ocr_status_t st = OCR_OK;
    for (int i = 0; i < n && st == OCR_OK; i++) {
        const OcrParamInfo *p = &t->items[i];
        // O2: the model file holds the master (the weight); the working copy, a rounding of it
        // (stochastic with amp_stochastic_rounding), is kept here so a resume restores it exactly.
        const OcrTensor *master = amp ? amp_engine_master(amp, i) : NULL;
        OcrTensor working = {0};
        if (master && master->data) working = ocr_params_tensor(t, i);
        const OcrTensor *third = masters_here ? (master && master->data ? master : NULL) : working.data ? &working : NULL;
        const OcrTensor *src[3] = {&opt->m[i], &opt->v[i], third};
        const char *const prefix[3] = {"moment1.", "moment2.", masters_here ? "master." : "working."};
        for (int j = 0; j < 3; j++) {
            if (!src[j] || !src[j]->data) continue;
            size_t len = strlen(prefix[j]) + strlen(p->name) + 1;
            names[k] = malloc(len);
            if (!names[k]) {
                st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
                break;
            }
            snprintf(names[k], len, "%s%s", prefix[j], p->name);
            ts[k].name = names[k];
            ts[k].dtype = src[j]->dtype;
            ts[k].ndim = p->ndim;
            memcpy(ts[k].shape, p->shape, sizeof ts[k].shape);
            ts[k].data = src[j]->data;
            if (src[j]->device.type != OCR_DEVICE_CPU) {
                // A GPU run's moments and masters are written from host copies.
                size_t nb = ocr_tensor_bytes(src[j]);
                void *h = malloc(nb ? nb : 1);
                if (!h) {
                    st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
                    break;
                }
                ocr_copy_bytes(ocr_cpu(), h, src[j]->device, src[j]->data, nb);
                ts[k].data = h;
                host[k] = h;
            }
            k++;
        }
    }
    if (st == OCR_OK) {
        char upd[32];
        snprintf(upd, sizeof upd, "%lld", (long long)opt->updates);
        OcrMetadataEntry meta[2] = {{"format", "ocrtrain-optimizer"}, {"updates", upd}};
        st = ocr_safetensors_write(path, ts, k, meta, 2);
    }
    for (int i = 0; i < 3 * n + 1; i++) free(names[i]), free(host[i]);
    free(names);
    free(host);
    free(ts);
    return st;
}

// The weights file: under O2 the f32 masters stand for the parameters that have one.
static ocr_status_t save_model(const char *path, const OcrModel *m, AmpEngine *amp) {
    const OcrParamTable *t = ocr_model_params((OcrModel *)m);
    const OcrTensor **masters = NULL;
    for (int i = 0; amp && i < t->count; i++) {
        const OcrTensor *mw = amp_engine_master(amp, i);
        if (!mw || !mw->data) continue;
        if (!masters) {
            masters = calloc((size_t)t->count, sizeof *masters);
            if (!masters) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        }
        masters[i] = mw;
    }
    ocr_status_t st = ocr_model_save_weights_from(m, path, masters);
    free(masters);
    return st;
}

// PaddleOCR's default charset (no Global.character_dict_path), one class a line.
static const char DEFAULT_CHARSET_LINES[] =
    "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\na\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\np\nq\nr\ns\nt\nu\nv\nw\nx\ny\nz\n";

// The dictionary the model's head was built from (Architecture's Global.character_dict_path, as
// a copy of the file; the default charset's lines without one), so fine-tuning from this
// checkpoint with another dictionary carries the head's rows over by character. use_space_char is
// not written: the head's class count tells it (lines + 1 or lines + 2).
static ocr_status_t save_dictionary(const char *path, const OcrModel *m) {
    const OcrArch *a = ocr_model_arch(m);
    if (!a->dict_path[0]) return ocr_write_file_atomic(path, DEFAULT_CHARSET_LINES, strlen(DEFAULT_CHARSET_LINES));
    char *text;
    size_t n;
    if (ocr_read_file(a->dict_path, &text, &n) != OCR_OK) {
        // A dictionary gone since the run started costs the record, not the checkpoint.
        ocr_log(OCR_LOG_WARN, "checkpoint %s: the dictionary is not recorded: %s", path, ocr_last_error());
        return OCR_OK;
    }
    char *t = realloc(text, n + 2);
    if (!t) {
        free(text);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    if (n && t[n - 1] != '\n') t[n++] = '\n';
    ocr_status_t st = ocr_write_file_atomic(path, t, n);
    free(t);
    return st;
}

// The AMP engine's state, in the engine's own words, as members of r: "scaler" (its loss scaler)
// and "amp" (the run's level and dtype when given, then the engine's counters).
static void amp_state_to_json(const AmpEngineState *as, const char *level, const char *dtype, cJSON *r) {
    amp_scaler_state_to_json(&as->scaler, cJSON_AddObjectToObject(r, "scaler"));
    cJSON *amp = cJSON_AddObjectToObject(r, "amp");
    if (level) cJSON_AddStringToObject(amp, "level", level);
    if (dtype) cJSON_AddStringToObject(amp, "dtype", dtype);
    amp_engine_state_to_json(as, amp);
}

static char *state_json(const CkptState *s) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "format", "ocrtrain-train-state");
    cJSON_AddNumberToObject(r, "version", CKPT_STATE_VERSION);
    cJSON_AddNumberToObject(r, "iter", (double)s->iter);
    cJSON_AddNumberToObject(r, "epoch", (double)s->epoch);
    cJSON_AddNumberToObject(r, "batch_in_epoch", (double)s->batch_in_epoch);
    cJSON_AddNumberToObject(r, "updates", (double)s->updates);
    // 64-bit values as strings: JSON numbers are doubles.
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)s->model_step);
    cJSON_AddStringToObject(r, "model_step", buf);
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)s->seed);
    cJSON_AddStringToObject(r, "seed", buf);
    amp_state_to_json(&s->amp, s->amp_level, s->amp_dtype, r);
    cJSON_AddNumberToObject(r, "best_acc", s->best_acc);
    cJSON_AddNumberToObject(r, "best_iter", (double)s->best_iter);
    snprintf(buf, sizeof buf, "%a", s->last_loss);
    cJSON_AddStringToObject(r, "last_loss_hex", buf);
    if (s->world_size > 0) {
        cJSON_AddNumberToObject(r, "world_size", (double)s->world_size);
        cJSON_AddNumberToObject(r, "global_batch", (double)s->global_batch);
    }
    char *text = cJSON_Print(r);
    cJSON_Delete(r);
    return text;
}

static int companion_path(char *out, size_t cap, const char *dir, const char *name, const char *file) {
    int n = snprintf(out, cap, "%s/" CKPT_COMPANION_PREFIX "%s.%s", dir, name, file);
    return n >= 0 && (size_t)n < cap;
}

// A companion's optimizer file and its state: the updates are the optimizer file's metadata; the
// state holds the AMP engine's state and the network's dropout counter.
static ocr_status_t save_companion(const char *dir, const CkptCompanion *c) {
    char p[4300];
    if (!companion_path(p, sizeof p, dir, c->name, "optimizer.safetensors"))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "checkpoint path too long: %s", dir);
    OCR_TRY(save_optimizer(p, c->opt, c->amp, c->params, 1));
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "format", "ocrtrain-companion-state");
    cJSON_AddNumberToObject(r, "version", CKPT_STATE_VERSION);
    cJSON_AddStringToObject(r, "network", c->name);
    char buf[32];
    snprintf(buf, sizeof buf, "%llu", (unsigned long long)c->model_step);
    cJSON_AddStringToObject(r, "model_step", buf);
    const AmpEngineState as = amp_engine_state(c->amp);
    amp_state_to_json(&as, NULL, NULL, r);
    char *text = cJSON_Print(r);
    cJSON_Delete(r);
    if (!text) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    companion_path(p, sizeof p, dir, c->name, "state.json");
    ocr_status_t st = ocr_write_file_atomic(p, text, strlen(text));
    free(text);
    return st;
}

ocr_status_t ckpt_save(const char *dir, const OcrModel *m, const Optimizer *opt, AmpEngine *amp, const CkptState *s) {
    return ckpt_save_with_companions(dir, m, opt, amp, s, NULL, 0);
}

ocr_status_t ckpt_save_with_companions(const char *dir, const OcrModel *m, const Optimizer *opt, AmpEngine *amp,
                                       const CkptState *s, const CkptCompanion *comp, int ncomp) {
    char tmp[4096], old[4096], p[4200];
    if (strlen(dir) + 32 > sizeof tmp) return ocr_set_error(OCR_ERR_INVALID_ARG, "checkpoint path too long: %s", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", dir);
    snprintf(old, sizeof old, "%s.old", dir);
    remove_ckpt_dir(tmp);
    OCR_TRY(ocr_make_dirs(tmp));
    path_join(p, sizeof p, tmp, "model.safetensors");
    ocr_status_t st = save_model(p, m, amp);
    if (st == OCR_OK) {
        path_join(p, sizeof p, tmp, "model.dict.txt");
        st = save_dictionary(p, m);
    }
    if (st == OCR_OK && opt) {
        path_join(p, sizeof p, tmp, "optimizer.safetensors");
        st = save_optimizer(p, opt, amp, ocr_model_params((OcrModel *)m), 0);
    }
    for (int c = 0; st == OCR_OK && c < ncomp; c++) st = save_companion(tmp, &comp[c]);
    if (st == OCR_OK) {
        char *text = state_json(s);
        if (!text) {
            st = ocr_set_error(OCR_ERR_OOM, "out of host memory");
        } else {
            path_join(p, sizeof p, tmp, "state.json");
            st = ocr_write_file_atomic(p, text, strlen(text));
            free(text);
        }
    }
    if (st != OCR_OK) {
        remove_ckpt_dir(tmp);
        return ocr_wrap_error(st, "checkpoint %s", dir);
    }
    // "<dir>.old" goes only when "<dir>" replaces it: a run resumed from "<dir>.old" (killed
    // between the two renames) keeps it until the new "<dir>" is in place.
    if (is_dir(dir)) {
        remove_ckpt_dir(old);
        if (rename(dir, old) != 0) {
            remove_ckpt_dir(tmp);
            return ocr_set_error(OCR_ERR_IO, "checkpoint %s: cannot rename the previous one: %s", dir,
                                 strerror(errno));
        }
    }
    ocr_test_write_pause();  // test hook (core/fileio.h): a kill here finds only "<dir>.old"
    if (rename(tmp, dir) != 0) {
        int e = errno;
        rename(old, dir);
        remove_ckpt_dir(tmp);
        return ocr_set_error(OCR_ERR_IO, "checkpoint %s: rename failed: %s", dir, strerror(e));
    }
    sync_parent(dir);
    remove_ckpt_dir(old);
    return OCR_OK;
}

// ---- reading ----------------------------------------------------------------------------------

ocr_status_t ckpt_resolve(const char *path, char *real, size_t cap) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = '\0';
    if (!is_dir(p)) {
        // A file inside a checkpoint directory (…/latest/state.json) names the directory.
        char *slash = strrchr(p, '/');
        if (slash && ocr_file_exists(p)) *slash = '\0';
    }
    char f[4200];
    snprintf(f, sizeof f, "%s/state.json", p);
    if (ocr_file_exists(f)) {
        snprintf(real, cap, "%s", p);
        return OCR_OK;
    }
    snprintf(f, sizeof f, "%s.old/state.json", p);
    if (ocr_file_exists(f)) {
        snprintf(real, cap, "%s.old", p);
        return OCR_OK;
    }
    return ocr_set_error(OCR_ERR_NOT_FOUND, "checkpoint %s not found (expected a directory with state.json, "
                         "model.safetensors and optimizer.safetensors, such as save_model_dir/latest)", path);
}

static ocr_status_t get_num(const cJSON *o, const char *key, const char *path, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v)) return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" is missing or not a number", path, key);
    // Every number here is a count or an accuracy; beyond 2^53 (or inf from "1e999") the
    // conversion to int64_t would be undefined (found by fuzz/fuzz_checkpoint.c).
    if (!(v->valuedouble >= -9007199254740992.0 && v->valuedouble <= 9007199254740992.0))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" = %g is out of range", path, key, v->valuedouble);
    *out = v->valuedouble;
    return OCR_OK;
}

static ocr_status_t get_str(const cJSON *o, const char *key, const char *path, const char **out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v)) return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" is missing or not a string", path, key);
    *out = v->valuestring;
    return OCR_OK;
}

// amp_state_to_json's members of r back into *as; *amp_obj = the "amp" object.
static ocr_status_t amp_state_from_json(const cJSON *r, const char *path, AmpEngineState *as, const cJSON **amp_obj) {
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(r, "scaler");
    const cJSON *amp = cJSON_GetObjectItemCaseSensitive(r, "amp");
    if (!cJSON_IsObject(sc) || !cJSON_IsObject(amp))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: \"scaler\" or \"amp\" is missing", path);
    OCR_TRY(amp_scaler_state_from_json(&as->scaler, sc, path));
    *amp_obj = amp;
    return amp_engine_state_from_json(as, amp, path);
}

static ocr_status_t parse_state(const cJSON *r, const char *path, CkptState *s) {
    const char *str = NULL;
    double d = 0;
    OCR_TRY(get_str(r, "format", path, &str));
    if (strcmp(str, "ocrtrain-train-state") != 0) return ocr_set_error(OCR_ERR_FORMAT, "%s: not a training state", path);
    OCR_TRY(get_num(r, "version", path, &d));
    if (d != CKPT_STATE_VERSION)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: state version %g, this build reads %d", path, d, CKPT_STATE_VERSION);
#define NUM(key, field)                        \
    OCR_TRY(get_num(r, key, path, &d));        \
    if (d < 0) return ocr_set_error(OCR_ERR_FORMAT, "%s: \"%s\" is negative", path, key); \
    s->field = (int64_t)d
    NUM("iter", iter);
    NUM("epoch", epoch);
    NUM("batch_in_epoch", batch_in_epoch);
    NUM("updates", updates);
    NUM("best_iter", best_iter);
#undef NUM
    OCR_TRY(get_num(r, "best_acc", path, &s->best_acc));
    OCR_TRY(get_str(r, "model_step", path, &str));
    s->model_step = strtoull(str, NULL, 10);
    OCR_TRY(get_str(r, "seed", path, &str));
    s->seed = strtoull(str, NULL, 10);
    OCR_TRY(get_str(r, "last_loss_hex", path, &str));
    s->last_loss = strtod(str, NULL);
    // Optional (written by data-parallel-aware builds): both or neither, both >= 1.
    s->world_size = s->global_batch = 0;
    if (cJSON_GetObjectItemCaseSensitive(r, "world_size") || cJSON_GetObjectItemCaseSensitive(r, "global_batch")) {
        OCR_TRY(get_num(r, "world_size", path, &d));
        if (d < 1 || d != (double)(int64_t)d)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: \"world_size\" = %g (a whole number >= 1)", path, d);
        s->world_size = (int64_t)d;
        OCR_TRY(get_num(r, "global_batch", path, &d));
        if (d < 1 || d != (double)(int64_t)d)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: \"global_batch\" = %g (a whole number >= 1)", path, d);
        s->global_batch = (int64_t)d;
    }
    const cJSON *amp;
    OCR_TRY(amp_state_from_json(r, path, &s->amp, &amp));
    OCR_TRY(get_str(amp, "level", path, &str));
    snprintf(s->amp_level, sizeof s->amp_level, "%s", str);
    OCR_TRY(get_str(amp, "dtype", path, &str));
    snprintf(s->amp_dtype, sizeof s->amp_dtype, "%s", str);
    return OCR_OK;
}

// The JSON document in file p (OCR_ERR_FORMAT naming it when it is not JSON).
static ocr_status_t read_json(const char *p, cJSON **out) {
    char *text;
    size_t size;
    OCR_TRY(ocr_read_file(p, &text, &size));
    *out = cJSON_ParseWithLength(text, size);
    free(text);
    return *out ? OCR_OK : ocr_set_error(OCR_ERR_FORMAT, "%s: not valid JSON", p);
}

ocr_status_t ckpt_load_state(const char *dir, CkptState *s) {
    char p[4200];
    snprintf(p, sizeof p, "%s/state.json", dir);
    cJSON *r;
    OCR_TRY(read_json(p, &r));
    memset(s, 0, sizeof *s);
    ocr_status_t st = parse_state(r, p, s);
    cJSON_Delete(r);
    return st;
}

static ocr_status_t copy_named(const OcrSafetensors *st, const char *name, const char *path, OcrTensor *dst) {
    const OcrNamedTensor *nt = ocr_safetensors_find(st, name);
    if (!nt) return ocr_set_error(OCR_ERR_FORMAT, "%s: no tensor %s", path, name);
    int64_t numel = 1;
    for (int d = 0; d < nt->ndim; d++) numel *= nt->shape[d];
    if (nt->dtype != OCR_F32 || numel != ocr_tensor_numel(dst))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: %s has another shape or dtype than this model's", path, name);
    ocr_copy_bytes(dst->device, dst->data, ocr_cpu(), nt->data, (size_t)numel * sizeof(float));  // any device
    return OCR_OK;
}

// A tensor stored in dst's own dtype (the O2 working copy), bytes as they are.
static ocr_status_t copy_named_exact(const OcrNamedTensor *nt, const char *path, OcrTensor *dst) {
    int64_t numel = 1;
    for (int d = 0; d < nt->ndim; d++) numel *= nt->shape[d];
    if (nt->dtype != dst->dtype || numel != ocr_tensor_numel(dst))
        return ocr_set_error(OCR_ERR_FORMAT, "%s: %s has another shape or dtype than this model's", path, nt->name);
    ocr_copy_bytes(dst->device, dst->data, ocr_cpu(), nt->data, ocr_tensor_bytes(dst));
    return OCR_OK;
}

// The moments (and O2's masters and working copy) from the optimizer file p. A master is
// "master.<name>" there, else the weights file mp's f32 weight (named weights_prefix + name: a
// distillation run's "Student.") with the working copy "working.<name>" in p; mp NULL: the
// masters must be in p (a companion's).
static ocr_status_t load_optimizer_file(const char *p, const char *mp, const char *weights_prefix, Optimizer *opt,
                                        AmpEngine *amp, const OcrParamTable *params) {
    char name[1024];
    OcrSafetensors *st, *model = NULL;
    OCR_TRY(ocr_safetensors_open(&st, p));
    ocr_status_t s = OCR_OK;
    for (int i = 0; i < params->count && s == OCR_OK; i++) {
        snprintf(name, sizeof name, "moment1.%s", params->items[i].name);
        s = copy_named(st, name, p, &opt->m[i]);
        if (s != OCR_OK) break;
        snprintf(name, sizeof name, "moment2.%s", params->items[i].name);
        s = copy_named(st, name, p, &opt->v[i]);
        OcrTensor *master = amp ? amp_engine_master(amp, i) : NULL;
        if (s != OCR_OK || !master || !master->data) continue;
        // The master: the model file's f32 weight (this layout), or "master.<name>" here (the
        // layout before it).
        snprintf(name, sizeof name, "master.%s", params->items[i].name);
        if (ocr_safetensors_find(st, name)) {
            s = copy_named(st, name, p, master);
            continue;
        }
        if (!mp) {
            s = ocr_set_error(OCR_ERR_FORMAT, "%s: no tensor %s (the O2 master)", p, name);
            break;
        }
        if (!model) s = ocr_safetensors_open(&model, mp);
        snprintf(name, sizeof name, "%s%s", weights_prefix, params->items[i].name);
        if (s == OCR_OK) s = copy_named(model, name, mp, master);
        if (s != OCR_OK) break;
        snprintf(name, sizeof name, "working.%s", params->items[i].name);
        const OcrNamedTensor *w = ocr_safetensors_find(st, name);
        if (!w) {
            s = ocr_set_error(OCR_ERR_FORMAT, "%s: no tensor %s (the O2 working copy)", p, name);
            break;
        }
        OcrTensor dst = ocr_params_tensor(params, i);
        s = copy_named_exact(w, p, &dst);
    }
    const char *upd = ocr_safetensors_metadata(st, "updates");
    if (s == OCR_OK) {
        if (!upd) s = ocr_set_error(OCR_ERR_FORMAT, "%s: no \"updates\" metadata", p);
        else opt->updates = strtoll(upd, NULL, 10);
    }
    if (model) ocr_safetensors_close(model);
    ocr_safetensors_close(st);
    return s;
}

ocr_status_t ckpt_load_optimizer(const char *dir, Optimizer *opt, AmpEngine *amp, const OcrParamTable *params) {
    return ckpt_load_optimizer_prefixed(dir, opt, amp, params, "");
}

ocr_status_t ckpt_load_optimizer_prefixed(const char *dir, Optimizer *opt, AmpEngine *amp, const OcrParamTable *params,
                                          const char *weights_prefix) {
    char p[4200], mp[4200];
    snprintf(p, sizeof p, "%s/optimizer.safetensors", dir);
    snprintf(mp, sizeof mp, "%s/model.safetensors", dir);
    return load_optimizer_file(p, mp, weights_prefix ? weights_prefix : "", opt, amp, params);
}

int ckpt_has_companion(const char *dir, const char *name) {
    char p[4300];
    return companion_path(p, sizeof p, dir, name, "state.json") && ocr_file_exists(p);
}

ocr_status_t ckpt_load_companion(const char *dir, CkptCompanion *c) {
    char p[4300];
    if (!companion_path(p, sizeof p, dir, c->name, "state.json"))
        return ocr_set_error(OCR_ERR_INVALID_ARG, "checkpoint path too long: %s", dir);
    cJSON *r;
    OCR_TRY(read_json(p, &r));
    const char *str = NULL;
    double version = 0;
    AmpEngineState as;
    memset(&as, 0, sizeof as);
    ocr_status_t st = get_str(r, "format", p, &str);
    if (st == OCR_OK && strcmp(str, "ocrtrain-companion-state") != 0)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s: not a companion network's training state", p);
    if (st == OCR_OK) st = get_num(r, "version", p, &version);
    if (st == OCR_OK && version != CKPT_STATE_VERSION)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s: state version %g, this build reads %d", p, version, CKPT_STATE_VERSION);
    if (st == OCR_OK) st = get_str(r, "network", p, &str);
    if (st == OCR_OK && strcmp(str, c->name) != 0)
        st = ocr_set_error(OCR_ERR_FORMAT, "%s: the state of network \"%s\", not \"%s\"", p, str, c->name);
    if (st == OCR_OK) st = get_str(r, "model_step", p, &str);
    if (st == OCR_OK) c->model_step = strtoull(str, NULL, 10);
    const cJSON *aj;
    if (st == OCR_OK) st = amp_state_from_json(r, p, &as, &aj);
    cJSON_Delete(r);
    OCR_TRY(st);
    // The moments and, under O2, the masters ("master.<name>": the weights file held the working
    // copy, which the network has already loaded).
    companion_path(p, sizeof p, dir, c->name, "optimizer.safetensors");
    OCR_TRY(load_optimizer_file(p, NULL, "", c->opt, c->amp, c->params));
    return amp_engine_restore_state(c->amp, &as);
}

ocr_status_t ckpt_weights_path(const char *path, char *out, size_t cap) {
    if (is_dir(path)) {
        snprintf(out, cap, "%s/model.safetensors", path);
        if (!ocr_file_exists(out))
            return ocr_set_error(OCR_ERR_NOT_FOUND, "%s is a directory without model.safetensors", path);
        return OCR_OK;
    }
    if (!ocr_file_exists(path)) {
        // PaddleOCR-style prefixes: ".../best_accuracy" for ".../best_accuracy.safetensors", or
        // for PaddleOCR's own ".../best_accuracy.pdparams" (a training checkpoint of PaddleOCR).
        snprintf(out, cap, "%s.safetensors", path);
        if (ocr_file_exists(out)) return OCR_OK;
        snprintf(out, cap, "%s.pdparams", path);
        if (ocr_file_exists(out)) return OCR_OK;
        return ocr_set_error(OCR_ERR_NOT_FOUND, "weights %s not found (nor %s.safetensors, %s.pdparams)", path, path,
                             path);
    }
    snprintf(out, cap, "%s", path);
    return OCR_OK;
}

// ---- fine-tuning with another dictionary ---------------------------------------------------------

// The dictionary recorded next to a weights file: X.safetensors or X.pdparams → X.dict.txt (the
// name `ocrtrain import` writes, and model.dict.txt in a checkpoint directory); any other name
// gets .dict.txt appended.
static void weights_dict_path(const char *file, char *out, size_t cap) {
    static const char *const exts[] = {".safetensors", ".pdparams", NULL};
    size_t n = strlen(file);
    for (int i = 0; exts[i]; i++) {
        size_t e = strlen(exts[i]);
        if (n > e && strcmp(file + n - e, exts[i]) == 0) {
            snprintf(out, cap, "%.*s.dict.txt", (int)(n - e), file);
            return;
        }
    }
    snprintf(out, cap, "%s.dict.txt", file);
}

// The weights being loaded: a safetensors file (our names and layouts) or a PaddleOCR .pdparams
// (PaddleOCR's names; per-class tensors are linear weights, biases and embeddings, whose layouts
// are the same on both sides).
typedef struct {
    OcrSafetensors *st;
    OcrPdparams *pd;
    const OcrWeightsNames *names;  // CTC-only <-> MultiHead names (models/weights_names.h), or NULL
} WeightsFile;

// The file's tensor for model tensor `name` as f32 (*owned: a converted copy to free), or NULL.
static ocr_status_t file_tensor(const WeightsFile *w, const char *name, const float **data, int *ndim,
                                const int64_t **shape, float **owned) {
    *data = NULL;
    *owned = NULL;
    if (w->pd) {
        char ours[512];
        for (int i = 0; i < w->pd->count; i++) {
            const OcrPdTensor *t = &w->pd->tensors[i];
            ocr_pdparams_map_name(t->name, ours, sizeof ours);
            // A MultiHead model keeps PaddleOCR's own names (as ocr_pdparams_load_into matches).
            if (t->ndim > OCR_MAX_DIMS || (strcmp(ours, name) != 0 && strcmp(t->name, name) != 0)) continue;
            *data = t->f32;
            *ndim = t->ndim;
            *shape = t->shape;
            return OCR_OK;
        }
        return OCR_OK;
    }
    char mapped[512];
    if (w->names && w->names->mode != OCR_NAMES_SAME) {
        if (!ocr_weights_names_to_file(w->names, name, mapped, sizeof mapped)) return OCR_OK;
        name = mapped;
    }
    const OcrNamedTensor *nt = ocr_safetensors_find(w->st, name);
    if (!nt || !ocr_dtype_is_float(nt->dtype)) return OCR_OK;
    OcrTensor v = ocr_tensor_view((void *)nt->data, nt->dtype, ocr_cpu(), nt->ndim, nt->shape);
    int64_t numel = ocr_tensor_numel(&v);
    float *f = malloc((size_t)(numel ? numel : 1) * sizeof *f);
    if (!f) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    ocr_tensor_to_f32(&v, f);
    *data = *owned = f;
    *ndim = nt->ndim;
    *shape = nt->shape;
    return OCR_OK;
}

// The model's classes: its dictionary (or the default charset), with the space class when the
// head has one more class than the lines (use_space_char).
static ocr_status_t model_dict(const OcrModel *m, OcrDict *d) {
    const OcrArch *a = ocr_model_arch(m);
    const char *path = a->dict_path[0] ? a->dict_path : NULL;
    OCR_TRY(ocr_dict_load(d, path, 0));
    if (d->num_classes == a->num_classes) return OCR_OK;
    int plain = d->num_classes;
    ocr_dict_free(d);
    if (path && a->num_classes == plain + 1) return ocr_dict_load(d, path, 1);
    return ocr_set_error(OCR_ERR_CONFIG, "the model's head has %d classes, its dictionary %s %d", a->num_classes,
                         path ? path : "(the default charset)", plain);
}

// The weights' classes from their dictionary file: `lines` + blank, + the space when the file's
// head has one more (the dictionary names no use_space_char; the head's class count tells it).
static ocr_status_t weights_dict(OcrDict *d, const char *path, const char *what, const char *file, int classes) {
    OCR_TRY(ocr_dict_load(d, path, 0));
    int lines = d->num_classes - 1;
    if (classes == lines + 1) return OCR_OK;
    ocr_dict_free(d);
    if (classes == lines + 2) return ocr_dict_load(d, path, 1);
    return ocr_set_error(OCR_ERR_FORMAT,
                         "%s %s has %d lines but the head of %s has %d classes (blank + the lines would be %d, with "
                         "use_space_char %d): not the dictionary these weights were trained with",
                         what, path, lines, file, classes, lines + 1, lines + 2);
}

// A model tensor's shape against a file tensor's.
static int same_shape(const OcrParamInfo *p, int ndim, const int64_t *shape) {
    if (p->ndim != ndim) return 0;
    for (int d = 0; d < ndim; d++)
        if (p->shape[d] != shape[d]) return 0;
    return 1;
}

// After the load by name: when the weights' dictionary is known (Global.pretrained_dict_path, or
// the one recorded next to the file) and differs from the model's, the head's per-class tensors
// (models/head_remap.h) are rebuilt by character and count as loaded; *remapped[i] marks them
// (parameter table indices; NULL when nothing was rebuilt). Without a known dictionary, a head of
// another class count cannot be carried over: an error when strict, else the warning names the key.
static ocr_status_t remap_head(OcrModel *m, const char *file, const WeightsFile *w, const char *dict_key_path,
                               int strict, OcrLoadReport *report, unsigned char **remapped) {
    *remapped = NULL;
    OcrParamTable *t = ocr_model_params(m);
    const OcrArch *arch = ocr_model_arch(m);
    // The weights' class count, from every per-class tensor that is in the file with the model's
    // other dimensions (one with another input size is a plain mismatch, not the dictionary's).
    int old_classes = 0, n_class = 0;
    const char *first = NULL;
    for (int i = 0; i < t->count; i++) {
        OcrClassTensor ct;
        const OcrParamInfo *p = &t->items[i];
        if (!ocr_head_class_tensor(p->name, &ct) || ct.axis >= p->ndim) continue;
        const float *data;
        const int64_t *shape;
        float *owned;
        int ndim;
        OCR_TRY(file_tensor(w, p->name, &data, &ndim, &shape, &owned));
        free(owned);
        if (!data || ndim != p->ndim) continue;
        int other_same = 1;
        for (int d = 0; d < ndim; d++) other_same &= d == ct.axis || shape[d] == p->shape[d];
        if (!other_same) continue;
        int c = ocr_class_tensor_classes(&ct, shape[ct.axis]);
        if (first && c != old_classes)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: the head's tensors disagree on the class count: %s gives %d, %s %d",
                                 file, first, old_classes, p->name, c);
        if (c < 1)
            return ocr_set_error(OCR_ERR_FORMAT, "%s: %s has %lld entries on its class axis, too few for a head", file,
                                 p->name, (long long)shape[ct.axis]);
        first = p->name;
        old_classes = c;
        n_class++;
    }
    if (!n_class) return OCR_OK;
    // The weights' dictionary: the config's key first, then the record next to the file.
    char side[4300];
    const char *dpath = NULL, *what = NULL;
    if (dict_key_path) {
        dpath = dict_key_path;
        what = "Global.pretrained_dict_path";
    } else {
        weights_dict_path(file, side, sizeof side);
        if (ocr_file_exists(side)) {
            dpath = side;
            what = "the dictionary recorded with the weights,";
        }
    }
    if (!dpath) {
        if (old_classes == arch->num_classes) return OCR_OK;  // nothing tells otherwise: by position, as before
        if (strict)
            return ocr_set_error(OCR_ERR_CONFIG,
                                 "%s has a head of %d classes, the config's dictionary gives %d, and the weights' "
                                 "dictionary is unknown (no %s): name it with Global.pretrained_dict_path so the head's "
                                 "rows are carried over by character",
                                 file, old_classes, arch->num_classes, side);
        ocr_log(OCR_LOG_WARN, "%s: a head of %d classes, the config's dictionary gives %d, and the weights' dictionary "
                "is unknown: the head keeps its initial values (Global.pretrained_dict_path names the weights' "
                "dictionary and carries its rows over by character)", file, old_classes, arch->num_classes);
        return OCR_OK;
    }
    OcrDict od, nd;
    OCR_TRY(weights_dict(&od, dpath, what, file, old_classes));
    ocr_status_t s = model_dict(m, &nd);
    if (s != OCR_OK) {
        ocr_dict_free(&od);
        return s;
    }
    OcrClassMap map;
    s = ocr_class_map_build(&map, od.classes, od.num_classes, nd.classes, nd.num_classes);
    if (s == OCR_OK && ocr_class_map_is_identity(&map)) {
        ocr_class_map_free(&map);
        ocr_dict_free(&od);
        ocr_dict_free(&nd);
        return OCR_OK;
    }
    OcrParamTable h = {0};
    unsigned char *marks = NULL;
    if (s == OCR_OK) s = ocr_params_host_copy(t, &h);
    if (s == OCR_OK && !(marks = calloc((size_t)t->count + 1, 1))) s = ocr_set_error(OCR_ERR_OOM, "out of host memory");
    int tensors = 0;
    for (int i = 0; s == OCR_OK && i < t->count; i++) {
        OcrClassTensor ct;
        const OcrParamInfo *p = &t->items[i];
        if (!ocr_head_class_tensor(p->name, &ct) || ct.axis >= p->ndim) continue;
        const float *data;
        const int64_t *shape;
        float *owned;
        int ndim;
        s = file_tensor(w, p->name, &data, &ndim, &shape, &owned);
        if (s != OCR_OK) break;
        int fits = data && ndim == p->ndim;
        for (int d = 0; fits && d < ndim; d++) fits = d == ct.axis || shape[d] == p->shape[d];
        if (!fits) {
            free(owned);
            continue;
        }
        OcrTensor dst = ocr_params_tensor(&h, i);
        float *cur = malloc((size_t)(p->numel ? p->numel : 1) * sizeof *cur);
        if (!cur) {
            free(owned);
            s = ocr_set_error(OCR_ERR_OOM, "out of host memory");
            break;
        }
        ocr_tensor_to_f32(&dst, cur);
        s = ocr_head_remap_tensor(&ct, &map, data, ndim, shape, cur, p->shape);
        if (s == OCR_OK) {
            ocr_tensor_from_f32(&dst, cur);
            // Of another shape, the load counted it as such; of the same shape it loaded by position.
            if (!same_shape(p, ndim, shape)) {
                report->mismatched--;
                report->loaded++;
            }
            marks[i] = 1;
            tensors++;
        }
        free(cur);
        free(owned);
    }
    if (s == OCR_OK) {
        ocr_params_upload(t, h.data);
        OcrHeadRemapReport *r = &report->dict;
        ocr_head_remap_report_fill(r, &map, od.classes, nd.classes);
        r->applied = 1;
        r->tensors = tensors;
        snprintf(r->dict_source, sizeof r->dict_source, "%.511s", dpath);
        *remapped = marks;
        marks = NULL;
    }
    free(marks);
    if (h.data) ocr_params_host_release(&h);
    ocr_class_map_free(&map);
    ocr_dict_free(&od);
    ocr_dict_free(&nd);
    return s;
}

// 1 when a model tensor name (ours, or PaddleOCR's before mapping) is one remap_head rebuilt.
static int is_remapped(const OcrModel *m, const unsigned char *remapped, const char *name) {
    if (!remapped) return 0;
    const OcrParamTable *t = ocr_model_params((OcrModel *)m);
    char ours[512];
    ocr_pdparams_map_name(name, ours, sizeof ours);
    int k = ocr_params_find(t, name);
    if (k < 0) k = ocr_params_find(t, ours);
    return k >= 0 && remapped[k];
}

// The first tensor of another shape, the rebuilt per-class tensors left out (safetensors).
static void first_mismatch(OcrModel *m, const WeightsFile *w, const unsigned char *remapped, OcrLoadReport *report) {
    OcrParamTable *tabs[2] = {ocr_model_params(m), ocr_model_stats(m)};
    report->first_mismatched[0] = '\0';
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < tabs[k]->count; i++) {
            const OcrParamInfo *p = &tabs[k]->items[i];
            if (k == 0 && remapped[i]) continue;
            char fname[512];
            snprintf(fname, sizeof fname, "%s", p->name);
            if (w->names && w->names->mode != OCR_NAMES_SAME && !ocr_weights_names_to_file(w->names, p->name, fname, sizeof fname))
                continue;
            const OcrNamedTensor *nt = ocr_safetensors_find(w->st, fname);
            if (!nt || (same_shape(p, nt->ndim, nt->shape) && ocr_dtype_is_float(nt->dtype))) continue;
            OcrLoadReport one;
            ocr_load_report_init(&one);
            ocr_load_report_add_mismatched(&one, p->name, nt->ndim, nt->shape, p->ndim, p->shape);
            snprintf(report->first_mismatched, sizeof report->first_mismatched, "%s", one.first_mismatched);
            return;
        }
}

// A .pdparams and the model (models/weights_names.h): a CTC-only checkpoint (neck.*, head.*) into a
// MultiHead model gets the MultiHead names in memory, so ocr_pdparams_load_into finds the CTC
// branch under the model's names; a MultiHead checkpoint into a CTC-only model is mapped by
// ocr_pdparams_load_into itself (its guidance tensors counted there).
static ocr_status_t pd_names_plan(const OcrModel *m, OcrPdparams *pd, OcrWeightsNames *nm) {
    const OcrParamTable *tp = ocr_model_params((OcrModel *)m), *ts = ocr_model_stats((OcrModel *)m);
    const char **fn = malloc((size_t)(pd->count + 1) * sizeof *fn);
    const char **mn = malloc((size_t)(tp->count + ts->count + 1) * sizeof *mn);
    if (!fn || !mn) {
        free(fn);
        free(mn);
        return ocr_set_error(OCR_ERR_OOM, "out of host memory");
    }
    for (int i = 0; i < pd->count; i++) fn[i] = pd->tensors[i].name;
    for (int i = 0; i < tp->count; i++) mn[i] = tp->items[i].name;
    for (int i = 0; i < ts->count; i++) mn[tp->count + i] = ts->items[i].name;
    ocr_weights_names_plan(nm, fn, pd->count, mn, tp->count + ts->count, "");
    free(fn);
    free(mn);
    for (int i = 0; nm->mode == OCR_NAMES_CTC_TO_MULTI && i < pd->count; i++) {
        char ours[512];
        if (!ocr_weights_names_to_model(nm, pd->tensors[i].name, ours, sizeof ours) ||
            strcmp(ours, pd->tensors[i].name) == 0)
            continue;
        char *dup = strdup(ours);
        if (!dup) return ocr_set_error(OCR_ERR_OOM, "out of host memory");
        free(pd->tensors[i].name);
        pd->tensors[i].name = dup;
        nm->renamed++;
    }
    return OCR_OK;
}

// The guidance branch in a .pdparams load's report: CTC → MultiHead, the model's guidance tensors
// the file lacks are fresh, not missing; MultiHead → CTC, the file's are dropped.
static void pd_names_report(const OcrModel *m, const OcrPdparams *pd, const OcrPdLoadReport *pr, OcrWeightsNames *nm,
                            OcrLoadReport *report) {
    if (nm->mode == OCR_NAMES_CTC_TO_MULTI) {
        const OcrParamTable *tabs[2] = {ocr_model_params((OcrModel *)m), ocr_model_stats((OcrModel *)m)};
        report->first_missing[0] = '\0';
        for (int i = 0; i < pr->n_missing_names; i++) {
            const char *n = pr->missing_names[i];
            if (ocr_weights_names_is_guidance(n, NULL)) {
                nm->fresh++;
                for (int k = 0; k < 2; k++) {
                    int j = ocr_params_find(tabs[k], n);
                    if (j >= 0) nm->fresh_values += tabs[k]->items[j].numel;
                }
                report->missing--;
            } else if (!report->first_missing[0]) {
                snprintf(report->first_missing, sizeof report->first_missing, "%.*s", OCR_LOAD_NAME_MAX - 1, n);
            }
        }
    } else if (pr->guidance > 0 && nm->mode == OCR_NAMES_MULTI_TO_CTC) {
        for (int i = 0; i < pd->count; i++)
            if (ocr_weights_names_is_guidance(pd->tensors[i].name, NULL)) {
                nm->dropped++;
                nm->dropped_values += pd->tensors[i].numel;
            } else if (strncmp(pd->tensors[i].name, "head.ctc_", 9) == 0) {
                nm->renamed++;
            }
    }
}

ocr_status_t ckpt_load_pretrained(OcrModel *m, const char *path, int strict, OcrLoadReport *report) {
    return ckpt_load_pretrained_dict(m, path, NULL, strict, report);
}

ocr_status_t ckpt_load_pretrained_dict(OcrModel *m, const char *path, const char *dict_path, int strict,
                                       OcrLoadReport *report) {
    return ckpt_load_pretrained_names(m, path, dict_path, strict, report, NULL);
}

ocr_status_t ckpt_load_pretrained_names(OcrModel *m, const char *path, const char *dict_path, int strict,
                                        OcrLoadReport *report, OcrWeightsNames *names_out) {
    char file[4200], what[1200];
    OcrWeightsNames names;
    memset(&names, 0, sizeof names);
    ocr_load_report_init(report);
    OCR_TRY(ckpt_weights_path(path, file, sizeof file));
    // Strict: nothing may change unless the file covers the model, so the load goes into a
    // copy of the weights that is put back on refusal.
    OcrParamTable *tabs[2] = {ocr_model_params(m), ocr_model_stats(m)};
    void *saved[2] = {NULL, NULL};
    for (int k = 0; strict && k < 2; k++) {
        OcrParamTable h;
        ocr_status_t s = ocr_params_host_copy(tabs[k], &h);
        if (s != OCR_OK) {
            free(saved[0]);
            return s;
        }
        saved[k] = h.data;
    }
    ocr_status_t s;
    WeightsFile w = {0};
    unsigned char *remapped = NULL;
    size_t flen = strlen(file);
    if (flen >= 9 && strcmp(file + flen - 9, ".pdparams") == 0) {
        // PaddleOCR's training checkpoint, names mapped by models/pdparams.h. Its MultiHead
        // guidance-branch tensors (SAR/NRTR) have no place in a CTC-only model: they are counted
        // and named in the log, not held against strictness (PaddleOCR drops them the same way
        // when a CTC-only config loads a MultiHead checkpoint).
        OcrPdLoadReport pr;
        memset(&pr, 0, sizeof pr);
        s = ocr_pdparams_load(&w.pd, file);
        if (s == OCR_OK) s = pd_names_plan(m, w.pd, &names);
        if (s == OCR_OK) s = ocr_pdparams_load_into(m, w.pd, &pr);
        if (s == OCR_OK) {
            report->loaded = pr.loaded;
            report->missing = pr.missing - pr.shape_mismatch;
            pd_names_report(m, w.pd, &pr, &names, report);
            report->mismatched = pr.shape_mismatch;
            report->unexpected = pr.unexpected;
            if (names.mode != OCR_NAMES_CTC_TO_MULTI)
                snprintf(report->first_missing, sizeof report->first_missing, "%.*s", OCR_LOAD_NAME_MAX - 1,
                         pr.first_missing);
            snprintf(report->first_unexpected, sizeof report->first_unexpected, "%.*s", OCR_LOAD_NAME_MAX - 1,
                     pr.first_unexpected);
            s = remap_head(m, file, &w, dict_path, strict, report, &remapped);
        }
        for (int i = 0; s == OCR_OK && i < pr.n_not_loaded && !report->first_mismatched[0]; i++) {
            // "name: shape ..."; the per-class tensors rebuilt by character are not mismatches.
            char name[512];
            snprintf(name, sizeof name, "%.*s", (int)strcspn(pr.not_loaded[i], ":"), pr.not_loaded[i]);
            if (strstr(pr.not_loaded[i], "shape") && !is_remapped(m, remapped, name))
                snprintf(report->first_mismatched, sizeof report->first_mismatched, "%s", pr.not_loaded[i]);
        }
        if (s == OCR_OK && pr.guidance > 0 && names.mode == OCR_NAMES_SAME)
            ocr_log(OCR_LOG_INFO, "%s: %d MultiHead guidance-branch tensors are not part of this model and were "
                    "not loaded", file, pr.guidance);
        if (s == OCR_OK && pr.other > 0)
            ocr_log(OCR_LOG_INFO, "%s: %d non-tensor entries skipped (PaddleOCR's name table)", file, pr.other);
        ocr_pdparams_report_free(&pr);
        if (w.pd) ocr_pdparams_free(w.pd);
    } else {
        // CTC-only weights into a MultiHead model, or the reverse: the CTC branch's names mapped.
        s = ocr_safetensors_open(&w.st, file);
        if (s == OCR_OK) ocr_weights_names_plan_file(&names, m, w.st);
        w.names = &names;
        if (s == OCR_OK)
            s = names.mode == OCR_NAMES_SAME ? ocr_model_load_partial(m, file, report)
                                             : ocr_weights_load_mapped(m, w.st, &names, report);
        if (s == OCR_OK) s = remap_head(m, file, &w, dict_path, strict, report, &remapped);
        if (s == OCR_OK && remapped && report->mismatched > 0) first_mismatch(m, &w, remapped, report);
        if (w.st) ocr_safetensors_close(w.st);
    }
    free(remapped);
    ocr_load_report_describe(report, what, sizeof what);
    if (s == OCR_OK && report->loaded == 0)
        s = ocr_set_error(OCR_ERR_FORMAT, "%s: no tensor of this model was found in it (wrong file or architecture?): "
                          "%s", file, what);
    else if (s == OCR_OK && !ocr_load_report_complete(report) && strict)
        s = ocr_set_error(OCR_ERR_FORMAT, "%s does not cover the model: %s. Pretrained weights must match the "
                          "architecture (a PP-OCRv4 ONNX import is the deploy form: Architecture.Backbone.deploy: true); "
                          "Global.pretrained_strict: false loads what matches and keeps initial values for the rest",
                          file, what);
    else if (s == OCR_OK && !ocr_load_report_complete(report))
        ocr_log(OCR_LOG_WARN, "%s (Global.pretrained_strict false): %s; the tensors that did not load keep their "
                "initial values", file, what);
    if (s == OCR_OK && names.mode != OCR_NAMES_SAME) {
        char d[1024];
        ocr_log(OCR_LOG_INFO, "%s: %s", file, ocr_weights_names_describe(&names, d, sizeof d));
    }
    if (names_out) *names_out = names;
    if (s == OCR_OK && report->dict.applied) {
        char d[2400];
        ocr_log(OCR_LOG_INFO, "%s: %s", file, ocr_head_remap_describe(&report->dict, d, sizeof d));
    }
    if (s != OCR_OK && strict) {
        for (int k = 0; k < 2; k++)
            if (saved[k]) ocr_params_upload(tabs[k], saved[k]);
    }
    free(saved[0]);
    free(saved[1]);
    return s;
}
