/* A statically linked program: LD_PRELOAD cannot load memtool's collector into
 * it. Exits with the code its first argument gives (0 without one). */
#include <stdlib.h>

int main(int argc, char** argv) { return argc > 1 ? atoi(argv[1]) : 0; }
