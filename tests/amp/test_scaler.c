// Loss scaler state machine against tables of expected scale sequences (tests/amp/data/
// scaler_tables.txt, written by make_scaler_tables.py from re-statements of PyTorch's,
// Paddle's and Apex's update rules), plus hand-checked cases: static and disabled scalers,
// floor and ceiling events, counters, restore.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amp/scaler.h"
#include "tests/common/test_util.h"

#define MAX_STEPS 20000

typedef struct {
    char name[64];
    AmpScalerConfig cfg;
    int steps;
    unsigned char overflow[MAX_STEPS];
    int n_changes;
    int change_step[512];
    double change_scale[512];
    double final_scale;
    long long final_good, final_bad;
} TableCase;

// Reads the next case; returns 0 at the end of the file.
static int read_case(FILE *f, TableCase *c) {
    char line[8192];
    memset(c, 0, sizeof *c);
    int in_case = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || line[0] == '\n') continue;
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (strncmp(line, "case ", 5) == 0) {
            snprintf(c->name, sizeof c->name, "%.63s", line + 5);
            c->cfg = amp_scaler_config_pytorch();
            in_case = 1;
        } else if (strncmp(line, "config ", 7) == 0) {
            for (char *tok = strtok(line + 7, " "); tok; tok = strtok(NULL, " ")) {
                char *eq = strchr(tok, '=');
                ck_assert_msg(eq, "bad config token %s", tok);
                *eq = 0;
                double v = strtod(eq + 1, NULL);
                if (!strcmp(tok, "init")) c->cfg.init_scale = (float)v;
                else if (!strcmp(tok, "incr_ratio")) c->cfg.incr_ratio = v;
                else if (!strcmp(tok, "decr_ratio")) c->cfg.decr_ratio = v;
                else if (!strcmp(tok, "incr_n")) c->cfg.incr_every_n_steps = (int64_t)v;
                else if (!strcmp(tok, "decr_n")) c->cfg.decr_every_n_nan_or_inf = (int64_t)v;
                else if (!strcmp(tok, "min")) c->cfg.min_scale = v;
                else if (!strcmp(tok, "max")) c->cfg.max_scale = v;
                else ck_abort_msg("unknown config key %s", tok);
            }
        } else if (strncmp(line, "steps ", 6) == 0) {
            c->steps = atoi(line + 6);
            ck_assert_int_le(c->steps, MAX_STEPS);
        } else if (strncmp(line, "overflow", 8) == 0) {
            for (char *tok = strtok(line + 8, " "); tok; tok = strtok(NULL, " ")) {
                int s = atoi(tok);
                ck_assert(s >= 0 && s < c->steps);
                c->overflow[s] = 1;
            }
        } else if (strncmp(line, "change ", 7) == 0) {
            ck_assert_int_lt(c->n_changes, 512);
            ck_assert_int_eq(sscanf(line + 7, "%d %lf", &c->change_step[c->n_changes], &c->change_scale[c->n_changes]),
                             2);
            c->n_changes++;
        } else if (strncmp(line, "final ", 6) == 0) {
            ck_assert_int_eq(sscanf(line + 6, "%lf %lld %lld", &c->final_scale, &c->final_good, &c->final_bad), 3);
        } else if (strcmp(line, "end") == 0) {
            ck_assert(in_case);
            return 1;
        } else {
            ck_abort_msg("unexpected line: %s", line);
        }
    }
    ck_assert_msg(!in_case, "case %s is not terminated", c->name);
    return 0;
}

START_TEST(reference_tables) {
    const char *path = OCR_SOURCE_DIR "/tests/amp/data/scaler_tables.txt";
    FILE *f = fopen(path, "r");
    ck_assert_msg(f, "cannot open %s", path);
    TableCase *c = malloc(sizeof *c);
    int cases = 0;
    while (read_case(f, c)) {
        ck_assert_msg(amp_scaler_config_check(&c->cfg, c->name) == OCR_OK, "%s", ocr_last_error());
        AmpScaler s;
        amp_scaler_init(&s, &c->cfg);
        int k = 0;
        float prev = amp_scaler_scale(&s);
        for (int step = 0; step < c->steps; step++) {
            amp_scaler_update(&s, c->overflow[step]);
            float now = amp_scaler_scale(&s);
            if (now != prev) {
                ck_assert_msg(k < c->n_changes, "%s: step %d: unexpected change %.9g -> %.9g", c->name, step,
                              (double)prev, (double)now);
                ck_assert_msg(c->change_step[k] == step && (float)c->change_scale[k] == now,
                              "%s: change %d: got step %d scale %.9g, want step %d scale %.9g", c->name, k, step,
                              (double)now, c->change_step[k], c->change_scale[k]);
                k++;
                prev = now;
            }
        }
        ck_assert_msg(k == c->n_changes, "%s: %d changes, want %d", c->name, k, c->n_changes);
        ck_assert_msg((float)c->final_scale == amp_scaler_scale(&s), "%s: final %.9g want %.9g", c->name,
                      (double)amp_scaler_scale(&s), c->final_scale);
        ck_assert_msg(s.good_steps == c->final_good && s.bad_steps == c->final_bad, "%s: counters %lld %lld want %lld %lld",
                      c->name, (long long)s.good_steps, (long long)s.bad_steps, c->final_good, c->final_bad);
        int64_t overflows = 0;
        for (int i = 0; i < c->steps; i++) overflows += c->overflow[i];
        ck_assert_int_eq(s.steps, c->steps);
        ck_assert_int_eq(s.overflow_steps, overflows);
        cases++;
    }
    fclose(f);
    free(c);
    ck_assert_int_ge(cases, 12);
}
END_TEST

// Hand-derived: growth interval 3, backoff after 2 overflows in a row, floor 4, ceiling 64.
START_TEST(hand_table_floor_ceiling) {
    AmpScalerConfig cfg = {1, 1, 16.0f, 2.0, 0.5, 3, 2, 4.0, 64.0};
    AmpScaler s;
    amp_scaler_init(&s, &cfg);
    // step: overflow?, expected scale after, expected event
    static const struct {
        int inf;
        float scale;
        amp_scale_event_t ev;
    } T[] = {
        {0, 16, AMP_SCALE_KEPT},  {0, 16, AMP_SCALE_KEPT},  {0, 32, AMP_SCALE_GREW},    // 3 good: grow
        {1, 32, AMP_SCALE_KEPT},  {0, 32, AMP_SCALE_KEPT},                              // lone overflow: no backoff, resets good
        {1, 32, AMP_SCALE_KEPT},  {1, 16, AMP_SCALE_BACKED_OFF},                        // two in a row: backoff
        {1, 16, AMP_SCALE_KEPT},  {1, 8, AMP_SCALE_BACKED_OFF},   {1, 8, AMP_SCALE_KEPT},
        {1, 4, AMP_SCALE_BACKED_OFF},                                                   // reaches the floor
        {1, 4, AMP_SCALE_KEPT},   {1, 4, AMP_SCALE_AT_FLOOR},                           // refused by the floor
        {0, 4, AMP_SCALE_KEPT},   {0, 4, AMP_SCALE_KEPT},   {0, 8, AMP_SCALE_GREW},
        {0, 8, AMP_SCALE_KEPT},   {0, 8, AMP_SCALE_KEPT},   {0, 16, AMP_SCALE_GREW},
        {0, 16, AMP_SCALE_KEPT},  {0, 16, AMP_SCALE_KEPT},  {0, 32, AMP_SCALE_GREW},
        {0, 32, AMP_SCALE_KEPT},  {0, 32, AMP_SCALE_KEPT},  {0, 64, AMP_SCALE_GREW},
        {0, 64, AMP_SCALE_KEPT},  {0, 64, AMP_SCALE_KEPT},  {0, 64, AMP_SCALE_AT_CEILING},
    };
    for (size_t i = 0; i < sizeof T / sizeof T[0]; i++) {
        amp_scale_event_t ev = amp_scaler_update(&s, T[i].inf);
        ck_assert_msg(amp_scaler_scale(&s) == T[i].scale && ev == T[i].ev, "step %zu: scale %g event %s, want %g %s",
                      i, (double)amp_scaler_scale(&s), amp_scale_event_name(ev), (double)T[i].scale,
                      amp_scale_event_name(T[i].ev));
    }
    // A backoff that would undershoot the floor is clamped to it (Paddle's kernel).
    AmpScalerConfig c2 = {1, 1, 6.0f, 2.0, 0.5, 100, 1, 4.0, 0.0};
    amp_scaler_init(&s, &c2);
    ck_assert_int_eq(amp_scaler_update(&s, 1), AMP_SCALE_BACKED_OFF);
    ck_assert_float_eq(amp_scaler_scale(&s), 4.0f);
    // Growth past the ceiling is clamped to it (Apex's min(max, 2s)).
    AmpScalerConfig c3 = {1, 1, 48.0f, 2.0, 0.5, 1, 1, 0.0, 64.0};
    amp_scaler_init(&s, &c3);
    ck_assert_int_eq(amp_scaler_update(&s, 0), AMP_SCALE_GREW);
    ck_assert_float_eq(amp_scaler_scale(&s), 64.0f);
}
END_TEST

START_TEST(static_and_disabled) {
    AmpScalerConfig cfg = amp_scaler_config_default();
    cfg.dynamic = 0;
    cfg.init_scale = 1024.0f;
    AmpScaler s;
    amp_scaler_init(&s, &cfg);
    for (int i = 0; i < 5000; i++) ck_assert_int_eq(amp_scaler_update(&s, i % 7 == 0), AMP_SCALE_KEPT);
    ck_assert_float_eq(amp_scaler_scale(&s), 1024.0f);
    ck_assert_int_eq(s.overflow_steps, (5000 + 6) / 7);
    ck_assert_float_eq(amp_scaler_inv_scale(&s), 1.0f / 1024.0f);

    AmpScalerConfig off = amp_scaler_config_off();
    amp_scaler_init(&s, &off);
    for (int i = 0; i < 10; i++) amp_scaler_update(&s, 1);
    ck_assert_float_eq(amp_scaler_scale(&s), 1.0f);
    ck_assert_float_eq(amp_scaler_inv_scale(&s), 1.0f);
    ck_assert_int_eq(s.overflow_steps, 10);
}
END_TEST

START_TEST(presets_and_restore) {
    AmpScalerConfig t = amp_scaler_config_pytorch(), p = amp_scaler_config_paddle(), d = amp_scaler_config_default();
    ck_assert(t.init_scale == 65536.0f && t.incr_every_n_steps == 2000 && t.decr_every_n_nan_or_inf == 1 &&
              t.min_scale == 0.0 && t.max_scale == 0.0);
    ck_assert(p.init_scale == 32768.0f && p.incr_every_n_steps == 1000 && p.decr_every_n_nan_or_inf == 2 &&
              p.min_scale == 1.0);
    ck_assert(d.init_scale == 65536.0f && d.incr_every_n_steps == 2000 && d.min_scale == 1.0 &&
              d.max_scale == 16777216.0);
    ck_assert_int_eq(amp_scaler_config_check(&t, NULL), OCR_OK);
    ck_assert_int_eq(amp_scaler_config_check(&p, NULL), OCR_OK);
    ck_assert_int_eq(amp_scaler_config_check(&d, NULL), OCR_OK);

    // Resume mid-interval: the next growth comes when the restored counter reaches the interval.
    AmpScalerConfig c = {1, 1, 8.0f, 2.0, 0.5, 10, 1, 1.0, 0.0};
    AmpScaler s;
    amp_scaler_init(&s, &c);
    ck_assert_int_eq(amp_scaler_restore(&s, 256.0f, 8, 0), OCR_OK);
    ck_assert_int_eq(amp_scaler_update(&s, 0), AMP_SCALE_KEPT);
    ck_assert_int_eq(amp_scaler_update(&s, 0), AMP_SCALE_GREW);
    ck_assert_float_eq(amp_scaler_scale(&s), 512.0f);
    ck_assert_int_eq(amp_scaler_restore(&s, NAN, 0, 0), OCR_ERR_FORMAT);
    ck_assert_int_eq(amp_scaler_restore(&s, 4.0f, -1, 0), OCR_ERR_FORMAT);
}
END_TEST

// Recompute mode's backoff (Global.amp_overflow: recompute): at once, whatever
// decr_every_n_nan_or_inf says; the counters as a scaler started at the lowered scale; the
// floor (or a static/disabled scaler, or f32 underflow without a floor) refuses it unchanged.
START_TEST(recompute_backoff) {
    AmpScalerConfig p = amp_scaler_config_paddle();  // decr_every_n_nan_or_inf = 2, floor 1
    AmpScaler s, fresh;
    amp_scaler_init(&s, &p);
    for (int i = 0; i < 5; i++) amp_scaler_update(&s, 0);
    amp_scaler_update(&s, 1);  // bad = 1: PaddleOCR's kernel would wait for a second overflow
    AmpScalerState before = amp_scaler_state(&s);
    ck_assert_int_eq(amp_scaler_backoff(&s), AMP_SCALE_BACKED_OFF);
    ck_assert_float_eq(amp_scaler_scale(&s), 16384.0f);
    ck_assert(s.good_steps == 0 && s.bad_steps == 0 && s.steps == before.steps &&
              s.overflow_steps == before.overflow_steps);
    AmpScalerConfig at = p;
    at.init_scale = 16384.0f;
    amp_scaler_init(&fresh, &at);
    for (int i = 0; i < 1200; i++) {  // the same growth from here on as a scaler started there
        ck_assert_int_eq(amp_scaler_update(&s, 0), amp_scaler_update(&fresh, 0));
        ck_assert(amp_scaler_scale(&s) == amp_scaler_scale(&fresh) && s.good_steps == fresh.good_steps);
    }
    // The floor: 3 → 1.5 → clamped to 1 (a backoff), then refused.
    AmpScalerConfig c = {1, 1, 3.0f, 2.0, 0.5, 10, 1, 1.0, 0.0};
    amp_scaler_init(&s, &c);
    ck_assert_int_eq(amp_scaler_backoff(&s), AMP_SCALE_BACKED_OFF);
    ck_assert_float_eq(amp_scaler_scale(&s), 1.5f);
    ck_assert_float_eq(amp_scaler_lowered(&c, 1.5f), 1.0f);
    ck_assert_int_eq(amp_scaler_backoff(&s), AMP_SCALE_BACKED_OFF);
    ck_assert_float_eq(amp_scaler_scale(&s), 1.0f);
    ck_assert_float_eq(amp_scaler_lowered(&c, 1.0f), 1.0f);
    ck_assert_int_eq(amp_scaler_backoff(&s), AMP_SCALE_AT_FLOOR);
    ck_assert_float_eq(amp_scaler_scale(&s), 1.0f);
    // No floor (PyTorch): down to the smallest f32, never to 0.
    AmpScalerConfig t = amp_scaler_config_pytorch();
    amp_scaler_init(&s, &t);
    int n = 0;
    while (amp_scaler_backoff(&s) == AMP_SCALE_BACKED_OFF) n++;
    ck_assert_int_eq(n, 16 + 149);
    ck_assert(amp_scaler_scale(&s) == ldexpf(1.0f, -149));
    // Static and disabled scalers never back off.
    c.dynamic = 0;
    amp_scaler_init(&s, &c);
    ck_assert_int_eq(amp_scaler_backoff(&s), AMP_SCALE_AT_FLOOR);
    ck_assert_float_eq(amp_scaler_scale(&s), 3.0f);
    AmpScalerConfig off = amp_scaler_config_off();
    amp_scaler_init(&s, &off);
    ck_assert_int_eq(amp_scaler_backoff(&s), AMP_SCALE_AT_FLOOR);
}
END_TEST

int main(void) {
    Suite *s = suite_create("amp_scaler");
    TCase *tc = tcase_create("scaler");
    tcase_add_test(tc, reference_tables);
    tcase_add_test(tc, hand_table_floor_ceiling);
    tcase_add_test(tc, static_and_disabled);
    tcase_add_test(tc, presets_and_restore);
    tcase_add_test(tc, recompute_backoff);
    suite_add_tcase(s, tc);
    return ocr_test_run_suite(s);
}
