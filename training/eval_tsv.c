#include "training/eval_tsv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fileio.h"

ocr_status_t eval_lines_write_tsv(const char *path, const EvalSet *s, const EvalLine *lines) {
    static const char *const kinds[] = {"in_shape", "widened", "squeezed", "unreadable"};
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return ocr_set_error(OCR_ERR_OOM, "--lines: out of memory");
    fprintf(f, "where\timage\tpath\twidth\tlabel\tprediction\tcorrect\tflags\n");
    for (int64_t i = 0; i < s->n; i++) {
        const EvalLine *l = &lines[i];
        char flags[96] = "";
        if (l->flags & EVAL_FLAG_TOO_LONG_FOR_MODEL) strcat(flags, "too_long_for_model,");
        if (l->flags & EVAL_FLAG_OVER_MAX_TEXT_LENGTH) strcat(flags, "over_max_text_length,");
        if (l->flags & EVAL_FLAG_UNKNOWN_CHARS) strcat(flags, "unknown_chars,");
        if (flags[0]) flags[strlen(flags) - 1] = '\0';
        fprintf(f, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", s->where[i], s->path[i], kinds[l->path < 4 ? l->path : 3],
                (int)l->width, s->label[i], l->prediction ? l->prediction : "",
                l->scored ? (l->correct ? "1" : "0") : "-", flags);
    }
    fclose(f);
    ocr_status_t st =
        buf ? ocr_write_file_atomic(path, buf, size) : ocr_set_error(OCR_ERR_OOM, "--lines: out of memory");
    free(buf);
    return st;
}
