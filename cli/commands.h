// The ocrtrain subcommands; each returns the process exit code (0 success, 1 runtime
// error, 2 usage or config error, 3 accuracy regression).
#ifndef OCR_CLI_COMMANDS_H
#define OCR_CLI_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_capacity(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_data(int argc, char **argv);
int cmd_pack(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_sensitivity(int argc, char **argv);

// The version string main passes on (report.json's build.version).
void training_set_version(const char *version);

#endif
