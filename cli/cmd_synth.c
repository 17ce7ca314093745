// ocrtrain synth --style receipt|document|zh --count N --seed S --out DIR [--height H]
//                [--max-width W] [--threads N] [--font-dir DIR] [--compare-fonts FONTS.TSV]
// Writes a synthetic PaddleOCR dataset (DIR/images/*.png, DIR/labels.txt, DIR/dict.txt,
// DIR/fonts.tsv); see data/synth.h. The output is the same for any thread count; a font set
// that differs from DIR's earlier fonts.tsv or from --compare-fonts is warned about on stderr.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "data/synth.h"

int cmd_synth(int argc, char **argv) {
    OcrSynthOptions opt;
    ocr_synth_default_options(&opt);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    opt.threads = cpus < 1 ? 1 : cpus > 16 ? 16 : (int)cpus;
    opt.font_dir = getenv("OCR_SYNTH_FONT_DIR");
    if (opt.font_dir && !opt.font_dir[0]) opt.font_dir = NULL;
    const char *style = NULL, *out = NULL;
    const CliFlag flags[] = {
        {CLI_STRING, "--style", .meta = "receipt|document|zh", .dest = &style,
         .help = "what the lines look like (default receipt)"},
        {CLI_INT64, "--count", "-n", .meta = "N", .dest = &opt.count, .lo = 1, .hi = OCR_SYNTH_MAX_COUNT, .required = 1,
         .help = "lines to write"},
        {CLI_UINT64, "--seed", .meta = "S", .dest = &opt.seed,
         .help = "the same seed writes the same dataset (default 0)"},
        {CLI_STRING, "--out", "-o", .meta = "DIR", .dest = &out, .required = 1,
         .help = "DIR/images/*.png, DIR/labels.txt, DIR/dict.txt, DIR/fonts.tsv"},
        {CLI_INT, "--height", .meta = "H", .dest = &opt.height, .lo = 16, .hi = 256,
         .help = "output line height in pixels (16..256, default 48)"},
        {CLI_INT, "--max-width", .meta = "W", .dest = &opt.max_width, .lo = 0, .hi = 8192,
         .help = "widest image (default 640*H/48)"},
        {CLI_INT, "--threads", "-j", .meta = "N", .dest = &opt.threads, .lo = 1, .hi = 256,
         .help = "worker threads (default: the online CPUs, at most 16); the output does not depend on it"},
        {CLI_STRING, "--font-dir", .meta = "DIR", .dest = &opt.font_dir,
         .help = "use every .ttf/.otf/.ttc font there instead of the declared Debian fonts\n"
                 "(default: $OCR_SYNTH_FONT_DIR when set)"},
        {CLI_STRING, "--compare-fonts", .meta = "FONTS.TSV", .dest = &opt.fonts_reference,
         .help = "warn when the fonts differ from this manifest (another dataset's fonts.tsv)"},
        {0}};
    const CliCommand cmd = {.name = "synth", .flags = flags};
    int rc0 = cli_parse(&cmd, argc, argv);
    if (rc0 != CLI_CONTINUE) return rc0;
    if (!out[0]) return cli_usage_error(&cmd, "--out DIR is required");
    if (style && ocr_synth_style_from_name(style, &opt.style) != OCR_OK) {
        fprintf(stderr, "ocrtrain %s\n", ocr_last_error());  // "synth: unknown style ..."
        return 2;
    }
    OcrSynthStats stats;
    ocr_status_t st = ocr_synth_write(out, &opt, &stats);
    if (st != OCR_OK) {
        fprintf(stderr, "ocrtrain %s\n", ocr_last_error());  // the message starts with "synth: "
        return st == OCR_ERR_INVALID_ARG || st == OCR_ERR_CONFIG ? 2 : 1;
    }
    printf("synth: %" PRId64 " %s lines (seed %" PRIu64 ", height %d) in %s: %" PRId64 " gray + %" PRId64
           " RGB PNGs, %.1f MB, %.2f s, %.0f lines/s with %d thread%s\n",
           stats.lines, ocr_synth_style_name(opt.style), opt.seed, opt.height, out, stats.gray_images,
           stats.rgb_images, (double)stats.png_bytes / 1e6, stats.seconds,
           stats.seconds > 0 ? (double)stats.lines / stats.seconds : 0.0, opt.threads, opt.threads == 1 ? "" : "s");
    printf("  labels: %s/labels.txt  dictionary: %s/dict.txt (train with use_space_char: true)\n", out, out);
    printf("  fonts: %s/fonts.tsv (%d face%s with their sha256)\n", out, stats.num_fonts,
           stats.num_fonts == 1 ? "" : "s");
    if (stats.fonts_missing[0])
        fprintf(stderr, "synth: warning: declared fonts not installed (the data differs from machines that have "
                        "them; scripts/setup.sh installs them): %s\n", stats.fonts_missing);
    if (stats.fonts_fallback[0])
        fprintf(stderr, "synth: warning: declared fonts taken from an older package (the data differs from machines "
                        "with the newer one, e.g. fonts-liberation2): %s\n", stats.fonts_fallback);
    if (stats.fonts_warning[0])
        fprintf(stderr, "synth: warning: %s; the same seed gives other images with other fonts\n", stats.fonts_warning);
    return 0;
}
