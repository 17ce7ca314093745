// LMDB environments: discovery, read-only readers, in-memory readers and the writer
// (see lmdb_dataset.h).
#include "data/lmdb_dataset.h"

#include <dirent.h>
#include <errno.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fileio.h"

// create_lmdb_dataset's map size: a virtual reservation, the file only grows as it is written.
#define LMDB_MAP_SIZE ((size_t)1 << 40)
#define LMDB_COMMIT_EVERY 1000

void ocr_lmdb_key(char *buf, size_t cap, const char *kind, int64_t index) {
    snprintf(buf, cap, "%s-%09lld", kind, (long long)index);
}

// ---- num-samples ------------------------------------------------------------------------

static int py_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

ocr_status_t ocr_lmdb_parse_num_samples(const uint8_t *value, size_t size, const char *where, int64_t *count) {
    size_t a = 0, b = size;
    while (a < b && py_space(value[a])) a++;
    while (b > a && py_space(value[b - 1])) b--;
    int neg = 0;
    if (a < b && (value[a] == '+' || value[a] == '-')) neg = value[a++] == '-';
    int64_t n = 0;
    int digits = 0, ok = a < b;
    for (size_t i = a; ok && i < b; i++) {
        uint8_t c = value[i];
        if (c == '_') {
            // Python allows single underscores between digits only.
            ok = digits > 0 && i + 1 < b && value[i + 1] >= '0' && value[i + 1] <= '9';
            continue;
        }
        if (c < '0' || c > '9') {
            ok = 0;
            break;
        }
        if (n > (INT64_C(1) << 40)) {  // far past the limit below; stop before overflowing
            ok = 0;
            break;
        }
        n = n * 10 + (c - '0');
        digits++;
    }
    if (!ok) {
        char shown[48];
        size_t k = 0;
        for (size_t i = 0; i < size && k + 5 < sizeof shown; i++)
            k += (size_t)snprintf(shown + k, sizeof shown - k, value[i] >= 0x20 && value[i] < 0x7F ? "%c" : "\\x%02x",
                                  value[i]);
        return ocr_set_error(OCR_ERR_FORMAT, "%s: num-samples must be a decimal count, got \"%s\"%s", where, shown,
                             size > 12 ? "..." : "");
    }
    if (neg && n > 0) return ocr_set_error(OCR_ERR_FORMAT, "%s: num-samples is negative (-%lld)", where, (long long)n);
    if (n > INT32_MAX)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: num-samples %lld is more than %d", where, (long long)n, INT32_MAX);
    *count = n;
    return OCR_OK;
}

ocr_status_t ocr_lmdb_read_num_samples(const OcrLmdbReader *r, int64_t *count) {
    uint8_t *v = NULL;
    size_t n = 0;
    int got = r->get(r->ctx, "num-samples", &v, &n);
    if (got < 0) return ocr_wrap_error(OCR_ERR_IO, "%s", r->name);
    if (got == 0)
        return ocr_set_error(OCR_ERR_FORMAT, "%s: no \"num-samples\" record (not a PaddleOCR LMDB dataset)", r->name);
    ocr_status_t st = ocr_lmdb_parse_num_samples(v, n, r->name, count);
    free(v);
    return st;
}

// ---- discovery --------------------------------------------------------------------------

typedef struct {
    char **dirs;
    int count, cap;
} DirList;

static ocr_status_t push_dir(DirList *l, const char *path) {
    if (l->count == l->cap) {
        int cap = l->cap ? l->cap * 2 : 8;
        char **d = realloc(l->dirs, sizeof(char *) * (size_t)cap);
        if (!d) return ocr_set_error(OCR_ERR_OOM, "LMDB discovery: out of memory");
        l->dirs = d;
        l->cap = cap;
    }
    if (!(l->dirs[l->count] = strdup(path))) return ocr_set_error(OCR_ERR_OOM, "LMDB discovery: out of memory");
    l->count++;
    return OCR_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// os.walk top-down: a directory with no sub-directory is a leaf (an environment); otherwise
// recurse into its real sub-directories (not the links) in sorted order.
static ocr_status_t walk(DirList *out, const char *dir, int depth) {
    if (depth > 64) return ocr_set_error(OCR_ERR_FORMAT, "LMDB discovery: %s is nested more than 64 levels", dir);
    DIR *d = opendir(dir);
    if (!d) return ocr_set_error(errno == ENOENT ? OCR_ERR_NOT_FOUND : OCR_ERR_IO, "cannot read directory %s: %s", dir,
                                 strerror(errno));
    DirList subs = {0};
    int any_sub = 0;
    ocr_status_t st = OCR_OK;
    struct dirent *e;
    while (st == OCR_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= sizeof path) {
            st = ocr_set_error(OCR_ERR_FORMAT, "LMDB discovery: path under %s too long", dir);
            break;
        }
        struct stat s, ls;
        if (stat(path, &s) != 0 || !S_ISDIR(s.st_mode)) continue;  // files, dangling links
        any_sub = 1;
        if (lstat(path, &ls) == 0 && S_ISLNK(ls.st_mode)) continue;  // os.walk(followlinks=False)
        st = push_dir(&subs, path);
    }
    closedir(d);
    if (st == OCR_OK && !any_sub) st = push_dir(out, dir);
    if (st == OCR_OK && subs.count > 1) qsort(subs.dirs, (size_t)subs.count, sizeof(char *), cmp_str);
    for (int i = 0; st == OCR_OK && i < subs.count; i++) st = walk(out, subs.dirs[i], depth + 1);
    ocr_lmdb_free_dirs(subs.dirs, subs.count);
    return st;
}

ocr_status_t ocr_lmdb_find_envs(const char *data_dir, char ***dirs, int *count) {
    *dirs = NULL;
    *count = 0;
    if (!data_dir || !data_dir[0])
        return ocr_set_error(OCR_ERR_CONFIG, "LMDBDataSet: data_dir is empty (the folder holding the LMDB folders)");
    struct stat s;
    if (stat(data_dir, &s) != 0 || !S_ISDIR(s.st_mode))
        return ocr_set_error(OCR_ERR_NOT_FOUND, "LMDBDataSet: data_dir %s is not a directory", data_dir);
    char root[4096];
    size_t n = strlen(data_dir);
    while (n > 1 && data_dir[n - 1] == '/') n--;  // walk() adds the separators
    if (n >= sizeof root) return ocr_set_error(OCR_ERR_FORMAT, "LMDBDataSet: data_dir too long");
    memcpy(root, data_dir, n);
    root[n] = '\0';
    DirList l = {0};
    ocr_status_t st = walk(&l, root, 0);
    if (st != OCR_OK) {
        ocr_lmdb_free_dirs(l.dirs, l.count);
        return st;
    }
    *dirs = l.dirs;
    *count = l.count;
    return OCR_OK;
}

void ocr_lmdb_free_dirs(char **dirs, int count) {
    for (int i = 0; i < count; i++) free(dirs[i]);
    free(dirs);
}

// ---- read-only environments -------------------------------------------------------------

struct OcrLmdbEnv {
    MDB_env *env;
    MDB_dbi dbi;
    char *dir;
    int64_t records;  // mdb_stat's entry count (OcrLmdbReader.records)
};

static ocr_status_t mdb_error(int rc, const char *what, const char *dir) {
    ocr_status_t st = rc == ENOENT ? OCR_ERR_NOT_FOUND : rc == ENOMEM ? OCR_ERR_OOM
                    : (rc == MDB_INVALID || rc == MDB_VERSION_MISMATCH || rc == MDB_CORRUPTED) ? OCR_ERR_FORMAT
                                                                                               : OCR_ERR_IO;
    return ocr_set_error(st, "LMDB %s: %s: %s", dir, what, mdb_strerror(rc));
}

ocr_status_t ocr_lmdb_env_open(OcrLmdbEnv **out, const char *dir) {
    *out = NULL;
    char data[4200];
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    if (!ocr_file_exists(data))
        return ocr_set_error(OCR_ERR_FORMAT, "LMDBDataSet: %s has no sub-directory but no data.mdb either (every "
                             "leaf folder under data_dir must be an LMDB environment)", dir);
    OcrLmdbEnv *e = calloc(1, sizeof *e);
    if (!e || !(e->dir = strdup(dir))) {
        free(e);
        return ocr_set_error(OCR_ERR_OOM, "LMDB %s: out of memory", dir);
    }
    int rc = mdb_env_create(&e->env);
    if (rc == 0) rc = mdb_env_set_maxreaders(e->env, 126);
    // The reader reserves the file's size; a read-only map never grows.
    if (rc == 0) rc = mdb_env_open(e->env, dir, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS | MDB_NORDAHEAD, 0444);
    MDB_txn *txn = NULL;
    if (rc == 0) rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, &txn);
    if (rc == 0) rc = mdb_dbi_open(txn, NULL, 0, &e->dbi);
    MDB_stat ms;
    if (rc == 0 && mdb_stat(txn, e->dbi, &ms) == 0) e->records = (int64_t)ms.ms_entries;
    if (txn) mdb_txn_abort(txn);
    if (rc != 0) {
        ocr_status_t st = mdb_error(rc, "cannot open", dir);
        ocr_lmdb_env_close(e);
        return st;
    }
    *out = e;
    return OCR_OK;
}

void ocr_lmdb_env_close(OcrLmdbEnv *e) {
    if (!e) return;
    if (e->env) mdb_env_close(e->env);
    free(e->dir);
    free(e);
}

static int env_get(void *ctx, const char *key, uint8_t **value, size_t *size) {
    OcrLmdbEnv *e = ctx;
    *value = NULL;
    *size = 0;
    MDB_txn *txn;
    int rc = mdb_txn_begin(e->env, NULL, MDB_RDONLY, &txn);
    if (rc != 0) {
        mdb_error(rc, "read transaction", e->dir);
        return -1;
    }
    MDB_val k = {strlen(key), (void *)key}, v;
    rc = mdb_get(txn, e->dbi, &k, &v);
    int res = 1;
    if (rc == MDB_NOTFOUND) {
        res = 0;
    } else if (rc != 0) {
        mdb_error(rc, key, e->dir);
        res = -1;
    } else {
        *value = malloc(v.mv_size ? v.mv_size : 1);
        if (!*value) {
            ocr_set_error(OCR_ERR_OOM, "LMDB %s: out of memory for %s (%zu bytes)", e->dir, key, v.mv_size);
            res = -1;
        } else {
            memcpy(*value, v.mv_data, v.mv_size);
            *size = v.mv_size;
        }
    }
    mdb_txn_abort(txn);
    return res;
}

OcrLmdbReader ocr_lmdb_env_reader(OcrLmdbEnv *env) {
    OcrLmdbReader r = {env_get, env, env->dir, env->records};
    return r;
}

// ---- in-memory tables -------------------------------------------------------------------

static int table_get(void *ctx, const char *key, uint8_t **value, size_t *size) {
    const OcrLmdbTable *t = ctx;
    *value = NULL;
    *size = 0;
    for (int i = 0; i < t->count; i++) {
        if (strcmp(t->keys[i], key) != 0) continue;
        *value = malloc(t->sizes[i] ? t->sizes[i] : 1);
        if (!*value) {
            ocr_set_error(OCR_ERR_OOM, "LMDB table: out of memory");
            return -1;
        }
        if (t->sizes[i]) memcpy(*value, t->values[i], t->sizes[i]);
        *size = t->sizes[i];
        return 1;
    }
    return 0;
}

OcrLmdbReader ocr_lmdb_table_reader(const OcrLmdbTable *table, const char *name) {
    OcrLmdbReader r = {table_get, (void *)table, name ? name : "<lmdb table>", table->count};
    return r;
}

// ---- writer -----------------------------------------------------------------------------

struct OcrLmdbWriter {
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    char *dir, *tmp;
    int64_t pending;
};

static void remove_tmp(const char *tmp) {
    char p[4200];
    snprintf(p, sizeof p, "%s/data.mdb", tmp);
    unlink(p);
    snprintf(p, sizeof p, "%s/lock.mdb", tmp);
    unlink(p);
    rmdir(tmp);
}

static void writer_free(OcrLmdbWriter *w) {
    if (w->txn) mdb_txn_abort(w->txn);
    if (w->env) mdb_env_close(w->env);
    free(w->dir);
    free(w->tmp);
    free(w);
}

ocr_status_t ocr_lmdb_writer_open(OcrLmdbWriter **out, const char *dir) {
    *out = NULL;
    struct stat s;
    if (stat(dir, &s) == 0)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "LMDB %s already exists (choose a new folder or remove it)", dir);
    OcrLmdbWriter *w = calloc(1, sizeof *w);
    size_t n = strlen(dir) + 32;
    if (!w || !(w->dir = strdup(dir)) || !(w->tmp = malloc(n))) {
        if (w) free(w->dir);
        free(w);
        return ocr_set_error(OCR_ERR_OOM, "LMDB %s: out of memory", dir);
    }
    snprintf(w->tmp, n, "%s.tmp-%ld", dir, (long)getpid());
    remove_tmp(w->tmp);  // a leftover of an earlier run with the same pid
    if (mkdir(w->tmp, 0755) != 0) {
        ocr_status_t st = ocr_set_error(OCR_ERR_IO, "LMDB %s: cannot create %s: %s", dir, w->tmp, strerror(errno));
        writer_free(w);
        return st;
    }
    int rc = mdb_env_create(&w->env);
    if (rc == 0) rc = mdb_env_set_mapsize(w->env, LMDB_MAP_SIZE);
    if (rc == 0) rc = mdb_env_open(w->env, w->tmp, 0, 0644);
    if (rc == 0) rc = mdb_txn_begin(w->env, NULL, 0, &w->txn);
    if (rc == 0) rc = mdb_dbi_open(w->txn, NULL, 0, &w->dbi);
    if (rc != 0) {
        ocr_status_t st = mdb_error(rc, "cannot create", w->tmp);
        char *tmp = strdup(w->tmp);
        writer_free(w);
        if (tmp) remove_tmp(tmp);
        free(tmp);
        return st;
    }
    *out = w;
    return OCR_OK;
}

ocr_status_t ocr_lmdb_writer_put(OcrLmdbWriter *w, const char *key, const void *value, size_t size) {
    MDB_val k = {strlen(key), (void *)key}, v = {size, (void *)value};
    int rc = mdb_put(w->txn, w->dbi, &k, &v, 0);
    if (rc == 0 && ++w->pending >= LMDB_COMMIT_EVERY) {
        // Bounded transactions: LMDB keeps every dirty page of a write transaction in memory.
        rc = mdb_txn_commit(w->txn);
        w->txn = NULL;
        if (rc == 0) rc = mdb_txn_begin(w->env, NULL, 0, &w->txn);
        w->pending = 0;
    }
    if (rc != 0) return mdb_error(rc, key, w->tmp);
    return OCR_OK;
}

ocr_status_t ocr_lmdb_writer_finish(OcrLmdbWriter *w) {
    int rc = mdb_txn_commit(w->txn);
    w->txn = NULL;
    ocr_status_t st = rc == 0 ? OCR_OK : mdb_error(rc, "commit", w->tmp);
    if (st == OCR_OK) {
        rc = mdb_env_sync(w->env, 1);
        if (rc != 0) st = mdb_error(rc, "sync", w->tmp);
    }
    mdb_env_close(w->env);
    w->env = NULL;
    if (st == OCR_OK) {
        // The lock file only serves writers; readers open with MDB_NOLOCK.
        char lock[4200];
        snprintf(lock, sizeof lock, "%s/lock.mdb", w->tmp);
        unlink(lock);
        if (rename(w->tmp, w->dir) != 0)
            st = ocr_set_error(OCR_ERR_IO, "LMDB: cannot rename %s to %s: %s", w->tmp, w->dir, strerror(errno));
    }
    if (st != OCR_OK) remove_tmp(w->tmp);
    writer_free(w);
    return st;
}

void ocr_lmdb_writer_abort(OcrLmdbWriter *w) {
    if (!w) return;
    if (w->txn) mdb_txn_abort(w->txn);
    w->txn = NULL;
    if (w->env) mdb_env_close(w->env);
    w->env = NULL;
    remove_tmp(w->tmp);
    writer_free(w);
}
