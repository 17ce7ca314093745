// The ocrtrain subcommands; each returns the process exit code (0 success, 1 runtime
// error, 2 usage or config error, 3 accuracy regression).
#ifndef OCR_APP_COMMANDS_H
#define OCR_APP_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_pack(int argc, char **argv);

#endif
