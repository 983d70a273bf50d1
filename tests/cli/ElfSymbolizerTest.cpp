// Module paths come from the stream: the symbolizer opens regular files only, and
// never waits on one (a FIFO opened by libdw blocked memtool run for good).
#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/ElfSymbolizer.h"

using namespace memtool;

TEST(ElfSymbolizer, AModuleThatIsNoRegularFileIsNeverOpened) {
    char dir[] = "/tmp/memtool-symbolizer-test-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string fifo = std::string(dir) + "/libfifo.so";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    core::ModuleRecord fifoModule{1, fifo, 0x10000, {{0x10000, 0x20000}}};
    core::ModuleRecord zero{2, "/dev/zero", 0x40000, {{0x40000, 0x50000}}};
    cli::ElfSymbolizer symbolizer({fifoModule, zero});

    const core::Frame& f = symbolizer.symbolize(0x10101);
    EXPECT_EQ(f.module, fifo);
    EXPECT_EQ(f.offset, 0x100u);  // the return address less one, less the bias
    EXPECT_EQ(f.function, "");
    const core::Frame& z = symbolizer.symbolize(0x40011);
    EXPECT_EQ(z.module, "/dev/zero");
    EXPECT_EQ(z.offset, 0x10u);
    EXPECT_EQ(z.function, "");
    // No one holds the FIFO open for reading: a writer that will not wait finds none.
    errno = 0;
    EXPECT_EQ(open(fifo.c_str(), O_WRONLY | O_NONBLOCK), -1);
    EXPECT_EQ(errno, ENXIO);
}
