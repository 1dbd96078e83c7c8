#pragma once
// The selfperf command line: one function per command, each taking the arguments after its name and
// returning the process exit status.
namespace selfperf::tool {

int record_main(int argc, char** argv);
int stat_main(int argc, char** argv);
int list_main(int argc, char** argv);
int report_main(int argc, char** argv);
int dump_main(int argc, char** argv);

}  // namespace selfperf::tool
