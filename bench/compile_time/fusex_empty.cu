// A translation unit that includes fusex and evaluates nothing: what every file that includes
// <fusex/fusex.hpp> pays before its first expression (bench/compile_time/compile_time.sh).
#include <fusex/fusex.hpp>

int main() { return 0; }
