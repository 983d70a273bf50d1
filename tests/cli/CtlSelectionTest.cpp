// `memtool ctl --all|--rank N|--run ID COMMAND`: how a selection is read from the
// words, which listed processes it selects, the files a snapshot of several goes
// to, and how each process's answer is headed (cli/ctl/CtlSelection.h).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli/ctl/CtlCommand.h"
#include "cli/ctl/CtlSelection.h"
#include "core/Error.h"

using namespace memtool;
using cli::CtlSelection;

namespace {

// The selection taken out of `words`, and the words left, as "a b c".
std::pair<std::optional<CtlSelection>, std::string> taken(std::vector<std::string> words) {
    std::optional<CtlSelection> selection = cli::takeSelection(words);
    std::string rest;
    for (const std::string& w : words) rest += (rest.empty() ? "" : " ") + w;
    return {selection, rest};
}

// The exit code and line of the usage error `words` make, or (0, "") when none.
std::pair<int, std::string> selectionError(std::vector<std::string> words) {
    try {
        cli::takeSelection(words);
    } catch (const core::Error& e) {
        return {e.exitCode(), e.what()};
    }
    return {0, ""};
}

nlohmann::json listed(int64_t pid, std::optional<int64_t> rank) {
    nlohmann::json p{{"pid", pid}, {"command", {"python"}}};
    if (rank) p["rank"] = *rank;
    return p;
}

}  // namespace

TEST(CtlSelection, TakesOneSelectorWhereverItStands) {
    const auto [all, allRest] = taken({"--all", "yield", "--to", "disk"});
    ASSERT_TRUE(all);
    EXPECT_EQ(all->by, CtlSelection::By::All);
    EXPECT_EQ(allRest, "yield --to disk");

    const auto [rank, rankRest] = taken({"status", "--rank", "3"});
    ASSERT_TRUE(rank);
    EXPECT_EQ(rank->by, CtlSelection::By::Rank);
    EXPECT_EQ(rank->value, 3);
    EXPECT_EQ(rankRest, "status");

    const auto [run, runRest] = taken({"--run=4200", "snapshot", "-o", "t%p.json"});
    ASSERT_TRUE(run);
    EXPECT_EQ(run->by, CtlSelection::By::Run);
    EXPECT_EQ(run->value, 4200);
    EXPECT_EQ(runRest, "snapshot -o t%p.json");

    const auto [none, noneRest] = taken({"42", "status"});
    EXPECT_FALSE(none);
    EXPECT_EQ(noneRest, "42 status");
}

TEST(CtlSelection, RefusesTwoSelectorsAndValuesThatAreNoRankOrRun) {
    struct Case {
        std::vector<std::string> words;
        std::string error;
    };
    const std::vector<Case> cases = {
        {{"--all", "--rank", "1", "status"},
         "ctl: --all and --rank 1 cannot go together: give one of --all, --rank N, --run ID"},
        {{"--rank", "0", "--rank", "1", "status"},
         "ctl: --rank 0 and --rank 1 cannot go together: give one of --all, --rank N, --run ID"},
        {{"--rank", "one", "status"},
         "ctl: --rank takes a rank (a whole number, 0 or more), not 'one'"},
        {{"--rank", "-1", "status"},
         "ctl: --rank takes a rank (a whole number, 0 or more), not '-1'"},
        {{"--rank=0,1", "status"},
         "ctl: --rank takes a rank (a whole number, 0 or more), not '0,1'"},
        {{"--rank"}, "ctl: --rank needs a value"},
        {{"--run", "0", "status"},
         "ctl: --run takes the pid of a memtool run (ctl list's RUN), not '0'"},
        {{"--run", "4194305", "status"},
         "ctl: --run takes the pid of a memtool run (ctl list's RUN), not '4194305'"},
        {{"--all=yes", "status"}, "ctl: --all takes no value"},
    };
    for (const Case& c : cases) {
        const auto [code, line] = selectionError(c.words);
        EXPECT_EQ(code, core::kExitBadInput) << c.words[0];
        EXPECT_EQ(line, c.error);
    }
}

TEST(CtlSelection, SelectsByRankOrRunAsCtlListShowsThem) {
    const CtlSelection all{CtlSelection::By::All, 0};
    const CtlSelection rank1{CtlSelection::By::Rank, 1};
    const CtlSelection run7{CtlSelection::By::Run, 7};
    EXPECT_TRUE(cli::selects(all, 7, listed(10, std::nullopt)));
    EXPECT_TRUE(cli::selects(rank1, 7, listed(11, 1)));
    EXPECT_FALSE(cli::selects(rank1, 7, listed(12, 0)));
    // A launcher of ranks has none itself: no rank selects it.
    EXPECT_FALSE(cli::selects(rank1, 7, listed(10, std::nullopt)));
    EXPECT_TRUE(cli::selects(run7, 7, listed(11, 1)));
    EXPECT_FALSE(cli::selects(run7, 8, listed(11, 1)));
    EXPECT_EQ(cli::selectionText(all), "--all");
    EXPECT_EQ(cli::selectionText(rank1), "--rank 1");
    EXPECT_EQ(cli::selectionText(run7), "--run 7");
}

TEST(CtlSelection, CtlsOwnOptionsAndTheSelectionComeOutOfTheWords) {
    cli::CtlOptions given;
    given.words = {"yield", "--rank", "2", "--format", "json", "--to", "host"};
    const cli::CtlOptions o = cli::withTrailingOptions(given);
    ASSERT_TRUE(o.selection);
    EXPECT_EQ(o.selection->value, 2);
    EXPECT_EQ(o.format, "json");
    EXPECT_EQ(o.words, (std::vector<std::string>{"yield", "--to", "host"}));
}

TEST(CtlSelection, ASnapshotOfSeveralWritesAFileForEach) {
    const CtlSelection all{CtlSelection::By::All, 0};
    const std::vector<cli::SelectedProcess> two = {{41, 0}, {42, 1}};
    EXPECT_EQ(cli::snapshotFiles("snap-%p.json", two, all),
              (std::vector<std::string>{"snap-41.json", "snap-42.json"}));
    // As `memtool run -o` takes them: %r the rank, %% a %.
    EXPECT_EQ(cli::snapshotFiles("r%r-100%%.json", two, all),
              (std::vector<std::string>{"r0-100%.json", "r1-100%.json"}));
    // One process: FILE as it is.
    EXPECT_EQ(cli::snapshotFiles("snap.json", {{41, std::nullopt}}, all),
              (std::vector<std::string>{"snap.json"}));
}

TEST(CtlSelection, ASnapshotOfSeveralToOneFileOrStdoutIsAUsageError) {
    const CtlSelection all{CtlSelection::By::All, 0};
    const auto error = [&](const std::string& pattern,
                           const std::vector<cli::SelectedProcess>& processes) -> std::string {
        try {
            cli::snapshotFiles(pattern, processes, all);
        } catch (const core::Error& e) {
            EXPECT_EQ(e.exitCode(), core::kExitBadInput) << pattern;
            return e.what();
        }
        return "";
    };
    EXPECT_EQ(error("snap.json", {{41, 0}, {42, 1}}),
              "ctl: snapshot with --all: -o snap.json names one file for processes 41 and 42; "
              "put %p (each one's pid) in it");
    // Two without a rank are both "none".
    EXPECT_EQ(error("r%r.json", {{41, std::nullopt}, {42, std::nullopt}}),
              "ctl: snapshot with --all: -o r%r.json names one file for processes 41 and 42; "
              "put %p (each one's pid) in it");
    EXPECT_EQ(error("-", {}),
              "ctl: snapshot with --all writes a file for each process: give -o FILE (%p in it "
              "is each one's pid)");
    EXPECT_EQ(error("", {}), error("-", {}));
    EXPECT_EQ(error("s%q.json", {}),
              "-o s%q.json: %q is no pattern (%p: the pid, %r: the rank, %%: a %)");
}

TEST(CtlSelection, EachLineOfAnAnswerSaysWhoseItIs) {
    EXPECT_EQ(cli::answerPrefix({1234, 1}), "[pid 1234 rank 1] ");
    EXPECT_EQ(cli::answerPrefix({1234, std::nullopt}), "[pid 1234] ");
    EXPECT_EQ(cli::prefixLines("yield: 1 MiB\n  cpu 1 MiB\n", "[pid 7] "),
              "[pid 7] yield: 1 MiB\n[pid 7]   cpu 1 MiB\n");
    // A last line without its newline is ended; nothing stays nothing.
    EXPECT_EQ(cli::prefixLines("a\nb", "> "), "> a\n> b\n");
    EXPECT_EQ(cli::prefixLines("", "> "), "");
    EXPECT_EQ(cli::prefixLines("\n", "> "), "> \n");
}

TEST(CtlSelection, AProcessIdIsDigitsAsTheKernelWritesThem) {
    EXPECT_EQ(cli::processIdOf("1"), 1);
    EXPECT_EQ(cli::processIdOf("4194304"), 4194304);
    for (const char* word : {"", "0", "4194305", "4294967297", "+12", " 12", "12 ", "-1", "0x10"})
        EXPECT_FALSE(cli::processIdOf(word)) << "'" << word << "'";
}
