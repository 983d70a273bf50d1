/* A statically linked program: LD_PRELOAD cannot load memtool's collector into
 * it, nor memtool attach. Exits with the code its first argument gives (0
 * without one); with "wait", prints "ready PID" and runs until its stdin ends. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        char c;
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        while (read(0, &c, 1) > 0) {
        }
        return 0;
    }
    return argc > 1 ? atoi(argv[1]) : 0;
}
