// ocrtrain import --onnx FILE --out W.safetensors (filled in with the ONNX importer).
#include <stdio.h>

#include "app/commands.h"

int cmd_import(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "ocrtrain import: not implemented yet\n");
    return 1;
}
