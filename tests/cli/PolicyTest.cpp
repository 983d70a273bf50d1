// Policies: the document's checks (one-line errors, nothing applied) and the
// engine's decisions over scripted usage curves, MemLord's README strategies
// among them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/policy/Policy.h"
#include "cli/policy/PolicyEngine.h"
#include "core/Error.h"

namespace memtool::cli::policy {
namespace {

using nlohmann::json;

constexpr uint64_t kGiB = uint64_t{1} << 30;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kSecond = 1'000'000'000;

std::string policyRefusal(const std::string& text) {
    try {
        parsePolicy(json::parse(text));
    } catch (const core::Error& e) {
        EXPECT_EQ(e.exitCode(), core::kExitBadInput);
        return e.what();
    }
    return "(accepted)";
}

TEST(Policy, TheIssuesExampleReadsAsItsSixRules) {
    const Policy p = parsePolicy(json::parse(R"({"interval_ms": 200, "rules": [
      {"device": "cuda", "metric": "used", "above": "85%", "do": "pause weights to host"},
      {"device": "cuda", "metric": "used", "above": "95%", "do": "pause weights to disk"},
      {"device": "cuda", "metric": "used", "below": "70%", "do": "resume weights"},
      {"device": "cpu",  "metric": "used", "above": "90%", "do": "spill host backups to disk"},
      {"device": "cuda:1", "band": [50, 75], "metric": "max", "above": "33%", "do": "gc"},
      {"device": "cpu", "metric": "process", "above": "200MiB", "do": "pause kv to disk",
       "cooldown_s": 5}]})"));
    ASSERT_EQ(p.rules.size(), 6u);
    std::vector<std::string> texts;
    for (const Rule& r : p.rules) texts.push_back(r.text());
    EXPECT_EQ(texts, (std::vector<std::string>{
                         "cuda used above 85%: pause weights to host",
                         "cuda used above 95%: pause weights to disk",
                         "cuda used below 70%: resume weights",
                         "cpu used above 90%: spill host backups to disk",
                         "cuda:1 max above 33% in band 50%-75%: gc",
                         "cpu process above 200.00 MiB: pause kv to disk",
                     }));
    EXPECT_EQ(p.rules[5].threshold.bytes, 200 * kMiB);
    EXPECT_EQ(p.rules[5].cooldownS, 5);
    EXPECT_EQ(p.rules[0].cooldownS, 1);
    EXPECT_EQ(p.rules[0].action.command(false),
              (std::vector<std::string>{"pause", "weights", "--policy", "--to", "host", "--park"}));
    // What `policy show` gives reads back as the same policy.
    const Policy again = parsePolicy(policyJson(p));
    ASSERT_EQ(again.rules.size(), 6u);
    for (size_t i = 0; i < 6; ++i) EXPECT_EQ(again.rules[i].text(), texts[i]);
}

TEST(Policy, EachMistakeIsOneLineNamingTheRule) {
    EXPECT_EQ(policyRefusal(R"([1])"), "policy: the document is a JSON object");
    EXPECT_EQ(policyRefusal(R"({"rules": []})"), "policy: rules: a list of one rule or more");
    EXPECT_EQ(policyRefusal(R"({"rules": [{"device": "cpu", "above": "12 parsecs", "do": "gc"}]})"),
              "policy: rule 1: above: '12 parsecs' is not a size (200MiB, 85%, 1048576)");
    EXPECT_EQ(policyRefusal(R"({"rules": [{"device": "npu", "above": "1GiB", "do": "gc"}]})"),
              "policy: rule 1: device: 'npu' is not \"cpu\", \"cuda\" or \"cuda:N\"");
    EXPECT_EQ(policyRefusal(R"({"rules": [{"device": "cpu", "above": "150%", "do": "gc"}]})"),
              "policy: rule 1: above: a percent is above 0 and at most 100");
    EXPECT_EQ(policyRefusal(R"({"rules": [{"device": "cpu", "above": "1GiB", "do": "explode"}]})"),
              "policy: rule 1: do: \"gc\", \"pause TAG [to host|disk]\", \"resume TAG\", "
              "\"spill host backups to disk\", \"yield [to host|disk]\" or \"restore\"");
    EXPECT_EQ(policyRefusal(R"({"rules": [{"device": "cpu", "do": "gc"}]})"),
              "policy: rule 1: no \"above\" or \"below\"");
    EXPECT_EQ(
        policyRefusal(R"({"rules": [{"device": "cpu", "above": 1, "below": 2, "do": "gc"}]})"),
        "policy: rule 1: \"above\" or \"below\", not both");
    EXPECT_EQ(policyRefusal(
                  R"({"rules": [{"device": "cpu", "metric": "freed", "below": 1, "do": "gc"}]})"),
              "policy: rule 1: \"below\" reads \"used\" or \"process\"; counters only rise");
    EXPECT_EQ(policyRefusal(R"({"rules": [{"device": "cpu", "above": 1, "do": "gc", "when": 3}]})"),
              "policy: rule 1: unknown key 'when'");
    EXPECT_EQ(policyRefusal(
                  R"({"interval_ms": 1, "rules": [{"device": "cpu", "above": 1, "do": "gc"}]})"),
              "policy: interval_ms: milliseconds from 10 to 60000");
    EXPECT_EQ(policyRefusal(
                  R"({"max_disk": "half", "rules": [{"device": "cpu", "above": 1, "do": "gc"}]})"),
              "policy: max_disk: 'half' is not a size (200MiB, 85%, 1048576)");
}

TEST(Policy, AReloadAtOrAboveItsOffloadIsRefused) {
    EXPECT_EQ(policyRefusal(R"({"rules": [
      {"device": "cuda", "above": "85%", "do": "pause weights to host"},
      {"device": "cuda", "below": "90%", "do": "resume weights"}]})"),
              "policy: rule 2 (resume weights below 90%) must read below rule 1's threshold "
              "(pause weights to host above 85%): they would flap");
    EXPECT_EQ(policyRefusal(R"({"rules": [
      {"device": "cuda:0", "above": "85%", "do": "pause weights"},
      {"device": "cuda", "above": "95%", "do": "resume weights"}]})"),
              "policy: rules 1 and 2 undo each other (pause weights, resume weights) on the "
              "same readings, both above");
    EXPECT_EQ(policyRefusal(R"({"rules": [
      {"device": "cpu", "metric": "process", "above": "100MiB", "do": "yield"},
      {"device": "cpu", "metric": "process", "below": "100MiB", "do": "restore"}]})"),
              "policy: rule 2 (restore below 100.00 MiB) must read below rule 1's threshold "
              "(yield above 100.00 MiB): they would flap");
    // Different tags, devices or metrics do not pair.
    EXPECT_EQ(policyRefusal(R"({"rules": [
      {"device": "cuda", "above": "85%", "do": "pause weights"},
      {"device": "cuda", "below": "90%", "do": "resume kv"},
      {"device": "cpu", "below": "90%", "do": "resume weights"}]})"),
              "(accepted)");
}

TEST(Policy, UnknownTagsAreRefusedAgainstTheProcesssRegions) {
    const Policy p = parsePolicy(json::parse(R"({"rules": [
      {"device": "cpu", "metric": "process", "above": "200MiB", "do": "pause kv to disk"}]})"));
    EXPECT_NO_THROW(checkTags(p, {"kv", "weights"}));
    try {
        checkTags(p, {"weights"});
        ADD_FAILURE() << "accepted";
    } catch (const core::Error& e) {
        EXPECT_STREQ(e.what(), "policy: rule 1: the process has no region tagged 'kv'");
    }
}

TEST(Policy, MemlordsStrategyDictIsItsGcRules) {
    const Policy p = parsePolicy(json::parse(R"J({
      "0-50": {"metric": "max", "threshold": {"percent": 50.0}},
      "(50, 75)": {"metric": "max", "threshold": {"percent": 33.0}},
      "75-101": {"metric": "freed", "threshold": {"percent": 10.0, "bytes": 1073741824}}})J"));
    ASSERT_EQ(p.rules.size(), 3u);
    EXPECT_EQ(p.rules[0].text(), "cuda max above 50% in band 0%-50%: gc");
    EXPECT_EQ(p.rules[1].text(), "cuda max above 33% in band 50%-75%: gc");
    EXPECT_EQ(p.rules[2].text(), "cuda freed above max(1.00 GiB, 10%) in band 75%-101%: gc");
    EXPECT_EQ(policyRefusal(R"({"0-50": {"metric": "used", "threshold": {"percent": 5}}})"),
              "policy: rule 1: a MemLord band's metric is \"allocated\", \"freed\" or \"max\"");
    EXPECT_EQ(policyRefusal(R"({"hot": {"metric": "max"}})"),
              "policy: 'hot' is neither a policy key nor a MemLord band (\"0-50\")");
}

// A scripted device: readings per second, the engine asked once a round, each
// decision answered as the runner would (ok).
struct Round {
    uint64_t used;
    uint64_t allocated;
    uint64_t freed;
};

std::vector<std::string> playCuda(PolicyEngine& engine, const std::vector<Round>& curve,
                                  uint64_t total, const std::string& device = "cuda:0") {
    std::vector<std::string> log;
    uint64_t now = 0;
    for (const Round& r : curve) {
        DeviceReading reading{device, r.used, total, 0, r.allocated, r.freed};
        for (const Decision& d : engine.evaluate({reading}, now)) {
            log.push_back(std::to_string(now / kSecond) + "s rule " + std::to_string(d.rule) + " " +
                          d.device + " " + metricName(d.metric) + "=" + std::to_string(d.reading) +
                          (d.reading > d.threshold ? ">" : "<") + std::to_string(d.threshold) +
                          " " + d.action.text());
            engine.done(d, true, now);
        }
        now += kSecond;
    }
    return log;
}

TEST(PolicyEngine, MemlordsThreeBandStrategyCollectsAsTheDeviceFills) {
    // README: (0,50) max > 50%, (50,75) max > 33%, (75,101) freed > 10%, on a
    // 100 GiB device.
    PolicyEngine engine(parsePolicy(json::parse(R"({
      "0-50": {"metric": "max", "threshold": {"percent": 50.0}},
      "50-75": {"metric": "max", "threshold": {"percent": 33.0}},
      "75-101": {"metric": "freed", "threshold": {"percent": 10.0}}})")));
    const uint64_t G = kGiB;
    const std::vector<Round> curve = {
        {10 * G, 40 * G, 0},         // band 1: max 40 < 50
        {40 * G, 51 * G, 11 * G},    // band 1: max 51 > 50 -> gc (counters from here)
        {60 * G, 80 * G, 11 * G},    // band 2: allocated since gc 29 < 33
        {70 * G, 85 * G, 11 * G},    // band 2: 34 > 33 -> gc
        {80 * G, 95 * G, 20 * G},    // band 3: freed since gc 9 < 10
        {80 * G, 96 * G, 22 * G},    // band 3: 11 > 10 -> gc
        {100 * G, 200 * G, 22 * G},  // band 3 (100% is in it): freed 0, allocated ignored
    };
    EXPECT_EQ(playCuda(engine, curve, 100 * G),
              (std::vector<std::string>{
                  "1s rule 1 cuda:0 max=54760833024>53687091200 gc",
                  "3s rule 2 cuda:0 max=36507222016>35433480192 gc",
                  "5s rule 3 cuda:0 freed=11811160064>10737418240 gc",
              }));
}

TEST(PolicyEngine, MemlordsOneBandThirdOfTheDeviceCollectsEachTimeAThirdMoved) {
    PolicyEngine engine(parsePolicy(
        json::parse(R"({"0-101": {"metric": "max", "threshold": {"percent": 33.0}}})")));
    const uint64_t G = kGiB;
    // A 24 GiB device: a third is 7.92 GiB. Rounds a second apart (cool-down 1 s);
    // after each gc the counters start again.
    const std::vector<Round> curve = {
        {2 * G, 4 * G, 0},      {8 * G, 8 * G, 0},       {9 * G, 12 * G, 4 * G},
        {9 * G, 16 * G, 8 * G}, {9 * G, 17 * G, 17 * G},
    };
    EXPECT_EQ(playCuda(engine, curve, 24 * G), (std::vector<std::string>{
                                                   "1s rule 1 cuda:0 max=8589934592>8504035246 gc",
                                                   "3s rule 1 cuda:0 max=8589934592>8504035246 gc",
                                                   "4s rule 1 cuda:0 max=9663676416>8504035246 gc",
                                               }));
}

TEST(PolicyEngine, OnlyTheIndexedDeviceThatCrossesCollects) {
    PolicyEngine engine(parsePolicy(json::parse(R"({"rules": [
      {"device": "cuda:1", "metric": "allocated", "above": "1GiB", "do": "gc"}]})")));
    const std::vector<DeviceReading> round = {
        {"cuda:0", 10 * kGiB, 80 * kGiB, 0, 5 * kGiB, 0},
        {"cuda:1", 10 * kGiB, 80 * kGiB, 0, 2 * kGiB, 0},
        {"cpu", 10 * kGiB, 80 * kGiB, 0, 9 * kGiB, 0},
    };
    const std::vector<Decision> d = engine.evaluate(round, 0);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].device, "cuda:1");
    EXPECT_EQ(d[0].reading, 2 * kGiB);
    // "cuda" is each device on its own: two gc decisions.
    PolicyEngine each(parsePolicy(json::parse(R"({"rules": [
      {"device": "cuda", "metric": "allocated", "above": "1GiB", "do": "gc"}]})")));
    const std::vector<Decision> both = each.evaluate(round, 0);
    ASSERT_EQ(both.size(), 2u);
    EXPECT_EQ(both[0].device, "cuda:0");
    EXPECT_EQ(both[1].device, "cuda:1");
}

TEST(PolicyEngine, OffloadTiersAndReloadKeepTheirHysteresis) {
    PolicyEngine engine(parsePolicy(json::parse(R"({"rules": [
      {"device": "cuda", "above": "85%", "do": "pause weights to host"},
      {"device": "cuda", "above": "95%", "do": "pause weights to disk"},
      {"device": "cuda", "below": "70%", "do": "resume weights"}]})")));
    const uint64_t G = kGiB;
    // A 100 GiB device's used memory, a second apart.
    const std::vector<Round> curve = {
        {80 * G, 0, 0},  // between: nothing
        {90 * G, 0, 0},  // > 85: pause to host
        {60 * G, 0, 0},  // < 70: resume
        {75 * G, 0, 0},  // between: nothing
        {84 * G, 0, 0},  // below 85: nothing
        {97 * G, 0, 0},  // > 85 and > 95 at once: the severe tier (disk)
        {99 * G, 0, 0},  // paused already: nothing
        {50 * G, 0, 0},  // resume
    };
    EXPECT_EQ(playCuda(engine, curve, 100 * G),
              (std::vector<std::string>{
                  "1s rule 1 cuda:0 used=96636764160>91268055040 pause weights to host",
                  "2s rule 3 cuda:0 used=64424509440<75161927680 resume weights",
                  "5s rule 2 cuda:0 used=104152956928>102005473280 pause weights to disk",
                  "7s rule 3 cuda:0 used=53687091200<75161927680 resume weights",
              }));
}

TEST(PolicyEngine, ACoolDownHoldsARuleAndAFailureBacksOff) {
    PolicyEngine engine(parsePolicy(json::parse(R"({"rules": [
      {"device": "cpu", "metric": "process", "above": "200MiB", "do": "gc", "cooldown_s": 5}]})")));
    const DeviceReading high{"cpu", std::nullopt, std::nullopt, 300 * kMiB, 0, 0};
    std::vector<uint64_t> acted;
    for (uint64_t s = 0; s < 12; ++s)
        for (const Decision& d : engine.evaluate({high}, s * kSecond)) {
            acted.push_back(s);
            engine.done(d, true, s * kSecond);
        }
    EXPECT_EQ(acted, (std::vector<uint64_t>{0, 5, 10}));
    // Failing: 2 x 5 s, then 4 x 5 s.
    PolicyEngine failing(engine.policy());
    acted.clear();
    for (uint64_t s = 0; s < 40; ++s)
        for (const Decision& d : failing.evaluate({high}, s * kSecond)) {
            acted.push_back(s);
            failing.done(d, false, s * kSecond);
        }
    EXPECT_EQ(acted, (std::vector<uint64_t>{0, 10, 30}));
}

TEST(PolicyEngine, AResumeTouchesOnlyWhatThePolicyPaused) {
    PolicyEngine engine(parsePolicy(json::parse(R"({"rules": [
      {"device": "cpu", "metric": "process", "above": "200MiB", "do": "pause kv to disk"},
      {"device": "cpu", "metric": "process", "below": "100MiB", "do": "resume kv"}]})")));
    const DeviceReading low{"cpu", std::nullopt, std::nullopt, 50 * kMiB, 0, 0};
    EXPECT_TRUE(engine.evaluate({low}, 0).empty());
    const DeviceReading high{"cpu", std::nullopt, std::nullopt, 250 * kMiB, 0, 0};
    std::vector<Decision> d = engine.evaluate({high}, kSecond);
    ASSERT_EQ(d.size(), 1u);
    // A pause that failed leaves the tag resident: no resume follows.
    engine.done(d[0], false, kSecond);
    EXPECT_TRUE(engine.evaluate({low}, 2 * kSecond).empty());
    d = engine.evaluate({high}, 10 * kSecond);
    ASSERT_EQ(d.size(), 1u);
    engine.done(d[0], true, 10 * kSecond);
    EXPECT_EQ(engine.pausedTags().count("kv"), 1u);
    d = engine.evaluate({low}, 11 * kSecond);
    ASSERT_EQ(d.size(), 1u);
    EXPECT_EQ(d[0].action.text(), "resume kv");
}

}  // namespace
}  // namespace memtool::cli::policy
