// The synthetic dataset: options, the shared generator, per-thread workers and the writer.
#define _GNU_SOURCE  // syncfs
#include "data/synth.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/fileio.h"
#include "data/synth_internal.h"

static const char *const STYLE_NAMES[OCR_SYNTH_NUM_STYLES] = {"receipt", "document", "zh"};

void ocr_synth_default_options(OcrSynthOptions *opt) {
    memset(opt, 0, sizeof *opt);
    opt->style = OCR_SYNTH_RECEIPT;
    opt->count = 1000;
    opt->height = 48;
    opt->threads = 1;
}

const char *ocr_synth_style_name(ocr_synth_style_t style) {
    return (unsigned)style < OCR_SYNTH_NUM_STYLES ? STYLE_NAMES[style] : "?";
}

ocr_status_t ocr_synth_style_from_name(const char *name, ocr_synth_style_t *style) {
    for (int i = 0; i < OCR_SYNTH_NUM_STYLES; i++)
        if (name && strcmp(name, STYLE_NAMES[i]) == 0) {
            *style = (ocr_synth_style_t)i;
            return OCR_OK;
        }
    return ocr_set_error(OCR_ERR_INVALID_ARG, "synth: unknown style '%s' (styles: receipt, document, zh)",
                         name ? name : "(null)");
}

static int max_width_of(const OcrSynthOptions *opt) {
    return opt->max_width > 0 ? opt->max_width : (640 * opt->height + 47) / 48;
}

static ocr_status_t check_options(const OcrSynthOptions *opt) {
    if (!opt) return ocr_set_error(OCR_ERR_INVALID_ARG, "synth: no options");
    if ((unsigned)opt->style >= OCR_SYNTH_NUM_STYLES)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "synth: unknown style %d (styles: receipt, document, zh)",
                             (int)opt->style);
    if (opt->count < 1 || opt->count > OCR_SYNTH_MAX_COUNT)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "synth: count must be 1..%d, got %lld", OCR_SYNTH_MAX_COUNT,
                             (long long)opt->count);
    if (opt->height < 16 || opt->height > 256)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "synth: height must be 16..256 pixels, got %d", opt->height);
    if (opt->max_width < 0 || (opt->max_width > 0 && opt->max_width < 2 * opt->height) || opt->max_width > 8192)
        return ocr_set_error(OCR_ERR_INVALID_ARG,
                             "synth: max_width must be 0 (automatic) or 2·height..8192 pixels, got %d",
                             opt->max_width);
    if (opt->threads < 1 || opt->threads > 256)
        return ocr_set_error(OCR_ERR_INVALID_ARG, "synth: threads must be 1..256, got %d", opt->threads);
    return OCR_OK;
}

static char *dup_or_null(const char *s, int *oom) {
    if (!s) return NULL;
    char *d = strdup(s);
    if (!d) *oom = 1;
    return d;
}

void ocr_synth_destroy(OcrSynth *s) {
    if (!s) return;
    synth_corpus_free(&s->corpus);
    synth_fonts_free(&s->fonts);
    free(s->dict_text);
    free(s->charset);
    free(s->font_dir_);
    free(s->words_path_);
    free(s->fortunes_dir_);
    free(s);
}

ocr_status_t ocr_synth_create(OcrSynth **out, const OcrSynthOptions *opt) {
    *out = NULL;
    OCR_TRY(check_options(opt));
    OcrSynth *s = calloc(1, sizeof *s);
    if (!s) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory");
    s->opt = *opt;
    int oom = 0;
    s->font_dir_ = dup_or_null(opt->font_dir, &oom);
    s->words_path_ = dup_or_null(opt->words_path, &oom);
    s->fortunes_dir_ = dup_or_null(opt->fortunes_dir, &oom);
    s->opt.font_dir = s->font_dir_, s->opt.words_path = s->words_path_, s->opt.fortunes_dir = s->fortunes_dir_;
    s->opt.fonts_reference = NULL;  // only the writer reads it, from its own options
    ocr_status_t st = oom ? ocr_set_error(OCR_ERR_OOM, "synth: out of memory") : OCR_OK;
    if (st == OCR_OK) st = synth_dict_build(&s->dict_text, opt->style);
    if (st == OCR_OK) {
        // The characters fonts must have: the dictionary without its newlines and space line.
        size_t n = strlen(s->dict_text);
        s->charset = malloc(n + 1);
        if (!s->charset) {
            st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory");
        } else {
            size_t k = 0;
            for (size_t i = 0; i < n; i++)
                if (s->dict_text[i] != '\n' && s->dict_text[i] != ' ') s->charset[k++] = s->dict_text[i];
            s->charset[k] = '\0';
        }
    }
    if (st == OCR_OK) st = synth_fonts_load(&s->fonts, opt->style, s->opt.font_dir, s->charset);
    if (st == OCR_OK) st = synth_corpus_load(&s->corpus, opt->style, s->opt.words_path, s->opt.fortunes_dir);
    if (st != OCR_OK) {
        ocr_synth_destroy(s);
        return st;
    }
    *out = s;
    return OCR_OK;
}

const char *ocr_synth_dict_text(const OcrSynth *s) { return s->dict_text; }
int ocr_synth_num_fonts(const OcrSynth *s) { return s->fonts.num_fonts; }
const char *ocr_synth_fonts_manifest(const OcrSynth *s) { return s->fonts.manifest ? s->fonts.manifest : ""; }
const char *ocr_synth_fonts_missing(const OcrSynth *s) { return s->fonts.missing ? s->fonts.missing : ""; }
const char *ocr_synth_fonts_fallback(const OcrSynth *s) { return s->fonts.fallback ? s->fonts.fallback : ""; }

struct OcrSynthWorker {
    const OcrSynth *synth;
    SynthRenderer *renderer;
};

ocr_status_t ocr_synth_worker_create(OcrSynthWorker **out, const OcrSynth *synth) {
    *out = NULL;
    OcrSynthWorker *w = calloc(1, sizeof *w);
    if (!w) return ocr_set_error(OCR_ERR_OOM, "synth: out of memory");
    w->synth = synth;
    ocr_status_t st = synth_renderer_create(&w->renderer, &synth->fonts);
    if (st != OCR_OK) {
        free(w);
        return st;
    }
    *out = w;
    return OCR_OK;
}

SynthRenderer *synth_worker_renderer(OcrSynthWorker *w) { return w->renderer; }

void ocr_synth_worker_destroy(OcrSynthWorker *w) {
    if (!w) return;
    synth_renderer_destroy(w->renderer);
    free(w);
}

ocr_status_t ocr_synth_render(OcrSynthWorker *w, int64_t index, OcrImage *img, char text[OCR_SYNTH_TEXT_CAP]) {
    const OcrSynth *s = w->synth;
    OcrRng rng = ocr_rng_make(s->opt.seed, OCR_SYNTH_STREAM + (uint64_t)index);
    char raw[OCR_SYNTH_TEXT_CAP];
    synth_text_generate(raw, s->opt.style, &s->corpus, &rng);
    OCR_TRY(synth_render_line(w->renderer, raw, s->opt.style, s->opt.height, max_width_of(&s->opt), &rng, img));
    // The label: the wide column gaps are plain spaces.
    size_t i = 0;
    for (; raw[i]; i++) text[i] = raw[i] == '\t' ? ' ' : raw[i];
    text[i] = '\0';
    return OCR_OK;
}

// ---- the writer -------------------------------------------------------------------------

typedef struct {
    const OcrSynth *synth;
    const char *images_dir;
    char (*texts)[OCR_SYNTH_TEXT_CAP];
    int64_t count;
    atomic_llong next;
    atomic_int failed;
    pthread_mutex_t lock;  // guards the fields below
    ocr_status_t status;
    char message[512];
    int64_t gray, rgb, bytes;
} WriteJob;

static void job_fail(WriteJob *job, ocr_status_t st) {
    pthread_mutex_lock(&job->lock);
    if (job->status == OCR_OK) {
        job->status = st;
        snprintf(job->message, sizeof job->message, "%s", ocr_last_error());
    }
    pthread_mutex_unlock(&job->lock);
    atomic_store(&job->failed, 1);
}

// Writes bytes to path through a temporary name and a rename, without an fsync per file
// (one syncfs covers all images before labels.txt is written).
static ocr_status_t write_image_file(const char *path, const uint8_t *data, size_t size) {
    char tmp[4096 + 32];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *fp = fopen(tmp, "wb");
    if (!fp) return ocr_set_error(OCR_ERR_IO, "synth: cannot create %s: %s", tmp, strerror(errno));
    size_t wrote = fwrite(data, 1, size, fp);
    int err = (wrote != size || ferror(fp)) ? (errno ? errno : EIO) : 0;
    if (fclose(fp) != 0 && !err) err = errno;
    if (!err && rename(tmp, path) != 0) err = errno;
    if (err) {
        remove(tmp);
        return ocr_set_error(OCR_ERR_IO, "synth: cannot write %s: %s", path, strerror(err));
    }
    return OCR_OK;
}

static void *write_worker(void *arg) {
    WriteJob *job = arg;
    OcrSynthWorker *w = NULL;
    ocr_status_t st = ocr_synth_worker_create(&w, job->synth);
    if (st != OCR_OK) {
        job_fail(job, st);
        return NULL;
    }
    int64_t gray = 0, rgb = 0, bytes = 0;
    char path[4096];
    while (!atomic_load(&job->failed)) {
        int64_t i = atomic_fetch_add(&job->next, 1);
        if (i >= job->count) break;
        OcrImage img;
        st = ocr_synth_render(w, i, &img, job->texts[i]);
        uint8_t *png = NULL;
        size_t size = 0;
        if (st == OCR_OK) st = synth_encode_png(&img, &png, &size);
        if (st == OCR_OK) {
            snprintf(path, sizeof path, "%s/%08lld.png", job->images_dir, (long long)i);
            st = write_image_file(path, png, size);
        }
        if (st == OCR_OK) {
            bytes += (int64_t)size;
            if (img.channels == 1) gray++;
            else rgb++;
        }
        free(png);
        ocr_image_free(&img);
        if (st != OCR_OK) {
            job_fail(job, st);
            break;
        }
    }
    ocr_synth_worker_destroy(w);
    pthread_mutex_lock(&job->lock);
    job->gray += gray, job->rgb += rgb, job->bytes += bytes;
    pthread_mutex_unlock(&job->lock);
    return NULL;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static ocr_status_t sync_dir_fs(const char *dir) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ocr_set_error(OCR_ERR_IO, "synth: cannot open %s: %s", dir, strerror(errno));
    int rc = syncfs(fd);
    int e = errno;
    close(fd);
    if (rc != 0) return ocr_set_error(OCR_ERR_IO, "synth: syncing the images in %s failed: %s", dir, strerror(e));
    return OCR_OK;
}

static ocr_status_t write_labels(const char *path, char (*texts)[OCR_SYNTH_TEXT_CAP], int64_t count) {
    OcrAtomicFile af;
    OCR_TRY(ocr_atomic_open(&af, path));
    for (int64_t i = 0; i < count; i++) {
        if (fprintf(af.fp, "images/%08lld.png\t%s\n", (long long)i, texts[i]) < 0) {
            ocr_atomic_abort(&af);
            return ocr_set_error(OCR_ERR_IO, "synth: cannot write %s: %s", path, strerror(errno));
        }
    }
    return ocr_atomic_commit(&af);
}

ocr_status_t ocr_synth_write(const char *out_dir, const OcrSynthOptions *opt, OcrSynthStats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!out_dir || !out_dir[0]) return ocr_set_error(OCR_ERR_INVALID_ARG, "synth: no output directory");
    OCR_TRY(check_options(opt));
    double t0 = now_s();
    OcrSynth *synth = NULL;
    OCR_TRY(ocr_synth_create(&synth, opt));  // fonts and corpora first: nothing is written when they are missing

    size_t dl = strlen(out_dir) + 32;
    char *images_dir = malloc(dl), *dict_path = malloc(dl), *labels_path = malloc(dl), *fonts_path = malloc(dl);
    char(*texts)[OCR_SYNTH_TEXT_CAP] = calloc((size_t)opt->count, sizeof *texts);
    char warning[1536] = "";
    ocr_status_t st = OCR_OK;
    if (!images_dir || !dict_path || !labels_path || !fonts_path || !texts)
        st = ocr_set_error(OCR_ERR_OOM, "synth: out of memory for %lld labels", (long long)opt->count);
    if (st == OCR_OK) {
        snprintf(images_dir, dl, "%s/images", out_dir);
        snprintf(dict_path, dl, "%s/dict.txt", out_dir);
        snprintf(labels_path, dl, "%s/labels.txt", out_dir);
        snprintf(fonts_path, dl, "%s/fonts.tsv", out_dir);
        // The font set against a given manifest (an error when it cannot be read: the caller
        // asked for the comparison) and against the one an earlier run left in out_dir.
        const char *refs[2] = {opt->fonts_reference, fonts_path};
        for (int i = 0; i < 2 && st == OCR_OK; i++) {
            if (!refs[i] || (i == 1 && !ocr_file_exists(refs[i]))) continue;
            if (i == 1 && opt->fonts_reference && strcmp(refs[0], refs[1]) == 0) continue;
            char *before = NULL;
            size_t n = 0;
            st = ocr_read_file(refs[i], &before, &n);
            if (st != OCR_OK) {
                if (i == 1) {  // an unreadable old manifest is replaced, and said so
                    ocr_clear_error();
                    st = OCR_OK;
                    snprintf(warning, sizeof warning, "%s could not be read and is replaced", refs[i]);
                } else {
                    char why[512];
                    snprintf(why, sizeof why, "%s", ocr_last_error());
                    st = ocr_set_error(st, "synth: the fonts manifest to compare with: %s", why);
                }
                continue;
            }
            int differs = 0;
            char diff[1200];
            st = ocr_synth_manifest_diff(before, ocr_synth_fonts_manifest(synth), diff, sizeof diff, &differs);
            free(before);
            if (st == OCR_OK && differs && !warning[0])
                snprintf(warning, sizeof warning, "fonts differ from %s%s: %s", refs[i],
                         i == 1 ? " (an earlier run)" : "", diff);
        }
    }
    if (st == OCR_OK) st = ocr_make_dirs(images_dir);
    WriteJob job;
    memset(&job, 0, sizeof job);
    if (st == OCR_OK) {
        job.synth = synth, job.images_dir = images_dir, job.texts = texts, job.count = opt->count;
        atomic_init(&job.next, 0);
        atomic_init(&job.failed, 0);
        pthread_mutex_init(&job.lock, NULL);
        int nt = opt->threads;
        if (nt > opt->count) nt = (int)opt->count;
        pthread_t tids[256];
        int started = 0;
        for (; started < nt - 1; started++)
            if (pthread_create(&tids[started], NULL, write_worker, &job) != 0) break;  // fewer threads is fine
        write_worker(&job);
        for (int i = 0; i < started; i++) pthread_join(tids[i], NULL);
        pthread_mutex_destroy(&job.lock);
        if (job.status != OCR_OK) st = ocr_set_error(job.status, "%s", job.message);
    }
    if (st == OCR_OK) st = sync_dir_fs(images_dir);
    if (st == OCR_OK) st = ocr_write_file_atomic(dict_path, synth->dict_text, strlen(synth->dict_text));
    if (st == OCR_OK) {
        const char *m = ocr_synth_fonts_manifest(synth);
        st = ocr_write_file_atomic(fonts_path, m, strlen(m));
    }
    if (st == OCR_OK) st = write_labels(labels_path, texts, opt->count);
    if (st == OCR_OK && stats) {
        stats->lines = opt->count;
        stats->gray_images = job.gray, stats->rgb_images = job.rgb;
        stats->png_bytes = job.bytes;
        stats->seconds = now_s() - t0;
        stats->num_fonts = ocr_synth_num_fonts(synth);
        snprintf(stats->fonts_missing, sizeof stats->fonts_missing, "%s", ocr_synth_fonts_missing(synth));
        snprintf(stats->fonts_fallback, sizeof stats->fonts_fallback, "%s", ocr_synth_fonts_fallback(synth));
        snprintf(stats->fonts_warning, sizeof stats->fonts_warning, "%s", warning);
    }
    free(images_dir);
    free(dict_path);
    free(labels_path);
    free(fonts_path);
    free(texts);
    ocr_synth_destroy(synth);
    return st;
}
