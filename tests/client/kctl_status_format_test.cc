#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <cmath>
#include <limits>
#include <string>

#include "client/kctl/json_writer.h"
#include "client/kctl/status_format.h"
#include "gtest/gtest.h"

namespace kd {
namespace kctl {
namespace {

namespace v1 = ::kerneld::v1;

// A status as a daemon with one CPU device and two sessions would report it. Seconds are
// multiples of 1/1000 so that the JSON (millisecond precision) reads back exactly.
v1::StatusResponse SampleStatus() {
  v1::StatusResponse s;
  s.set_version("0.1.0");
  s.set_uptime_seconds(3723.25);  // 1h02m03s
  s.add_backends("cpu");
  s.set_data_socket("/run/kerneld/kerneld.sock");
  s.set_metrics_address("127.0.0.1:9464");
  v1::DeviceInfo* d = s.add_devices();
  d->set_backend("cpu");
  d->set_ordinal(0);
  d->set_name("host \"cpu\"");
  d->set_arch("x86_64");
  d->set_memory_total_bytes(uint64_t{16} << 30);
  d->set_memory_used_bytes(0);
  d->set_memory_pooled_bytes(1536);
  d->set_memory_imported_bytes(uint64_t{3} << 20);
  d->set_healthy(true);
  v1::SessionInfo* a = s.add_sessions();
  a->set_session_id("s-1");
  a->set_client_name("rank0\ttrainer");
  a->set_buffers(3);
  a->set_buffer_bytes(uint64_t{3} << 20);
  a->set_age_seconds(245.5);  // 4m05s
  a->set_idle_seconds(0.125);
  a->set_lease_seconds(0);
  a->set_pid(4242);
  a->set_uid(1000);
  v1::SessionInfo* b = s.add_sessions();
  b->set_session_id("s-22");
  b->set_client_name("rank1");
  b->set_buffers(0);
  b->set_age_seconds(2.0);
  b->set_idle_seconds(2.0);
  b->set_lease_seconds(30);
  b->set_pid(0);  // opened over TCP: no known peer
  b->set_uid(-1);
  s.set_sessions_active(2);
  s.set_buffers_registered(3);
  s.set_buffer_bytes(uint64_t{3} << 20);
  s.set_ops_completed(uint64_t{1} << 40);
  s.set_ops_failed(7);
  s.set_shm_faults(2);
  return s;
}

TEST(FormatStatusJsonTest, ReadsBackAsTheSameMessage) {
  const v1::StatusResponse status = SampleStatus();
  const std::string json = FormatStatusJson(status);
  v1::StatusResponse parsed;
  const auto result = google::protobuf::util::JsonStringToMessage(json, &parsed);
  ASSERT_TRUE(result.ok()) << result << "\n" << json;
  std::string diff;
  google::protobuf::util::MessageDifferencer differencer;
  differencer.ReportDifferencesToString(&diff);
  EXPECT_TRUE(differencer.Compare(status, parsed)) << diff << "\n" << json;
}

TEST(FormatStatusJsonTest, EveryTopLevelFieldIsPresentEvenAtItsDefault) {
  const std::string json = FormatStatusJson(v1::StatusResponse());
  for (const char* key :
       {"\"version\": \"\"", "\"uptime_seconds\": 0", "\"draining\": false",
        "\"data_socket\": \"\"", "\"metrics_address\": \"\"", "\"backends\": []", "\"devices\": []",
        "\"sessions\": []", "\"sessions_active\": 0", "\"buffers_registered\": 0",
        "\"buffer_bytes\": 0", "\"ops_completed\": 0", "\"ops_failed\": 0", "\"shm_faults\": 0"}) {
    EXPECT_NE(json.find(key), std::string::npos) << key << " missing from\n" << json;
  }
}

TEST(FormatStatusJsonTest, SixtyFourBitCountsAreNumbersNotStrings) {
  const std::string json = FormatStatusJson(SampleStatus());
  EXPECT_NE(json.find("\"ops_completed\": 1099511627776"), std::string::npos) << json;
  EXPECT_NE(json.find("\"memory_total_bytes\": 17179869184"), std::string::npos) << json;
}

TEST(FormatStatusJsonTest, EveryFieldOfTheMessageHasAKey) {
  // A field added to the proto and forgotten here fails this test.
  const std::string json = FormatStatusJson(SampleStatus());
  for (const google::protobuf::Descriptor* d :
       {v1::StatusResponse::descriptor(), v1::DeviceInfo::descriptor(),
        v1::SessionInfo::descriptor()}) {
    for (int i = 0; i < d->field_count(); ++i) {
      EXPECT_NE(json.find("\"" + d->field(i)->name() + "\": "), std::string::npos)
          << d->name() << "." << d->field(i)->name();
    }
  }
}

TEST(FormatStatusTableTest, ShowsVersionUptimeDevicesSessionsAndTotals) {
  const std::string table = FormatStatusTable(SampleStatus());
  for (const char* text :
       {"kerneld 0.1.0",
        "up 1h02m",
        "serving",
        "/run/kerneld/kerneld.sock",
        "127.0.0.1:9464",
        "backends     cpu",
        "cpu:0",
        "x86_64",
        "16.0 GiB",
        "1.5 KiB",
        "3.0 MiB",
        "ok",
        "s-1",
        "rank0",
        "4242",
        " 1000 ",
        "4m05s",
        "0.1s",
        "stream",
        "s-22",
        "30s",
        "2 sessions, 3 buffers, 3.0 MiB; ops 1099511627776 completed, 7 failed"}) {
    EXPECT_NE(table.find(text), std::string::npos) << "\"" << text << "\" missing from\n" << table;
  }
}

TEST(FormatStatusTableTest, SessionColumnsLineUp) {
  const std::string table = FormatStatusTable(SampleStatus());
  const size_t header = table.find("SESSION");
  ASSERT_NE(header, std::string::npos);
  const size_t header_line_start = table.rfind('\n', header) + 1;
  const size_t header_end = table.find('\n', header);
  const size_t row1 = header_end + 1, row1_end = table.find('\n', row1);
  const size_t row2 = row1_end + 1, row2_end = table.find('\n', row2);
  // Right-aligned columns end in the same place on every line: the last column is LEASE.
  EXPECT_EQ(header_end - header_line_start, row1_end - row1);
  EXPECT_EQ(row1_end - row1, row2_end - row2);
}

TEST(FormatStatusTableTest, DrainingUnhealthyAndEmptyStatesAreSpelledOut) {
  v1::StatusResponse s;
  s.set_draining(true);
  s.add_devices()->set_backend("cuda");
  std::string table = FormatStatusTable(s);
  EXPECT_NE(table.find("DRAINING"), std::string::npos) << table;
  EXPECT_NE(table.find("UNHEALTHY"), std::string::npos) << table;
  EXPECT_NE(table.find("no sessions"), std::string::npos) << table;
  EXPECT_NE(table.find("0 sessions, 0 buffers"), std::string::npos) << table;
  table = FormatStatusTable(v1::StatusResponse());
  EXPECT_NE(table.find("no devices"), std::string::npos) << table;
}

TEST(FormatBytesTest, UsesBinaryUnits) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(uint64_t{5} << 30), "5.0 GiB");
  EXPECT_EQ(FormatBytes(~uint64_t{0}), "16.0 EiB");
}

TEST(FormatSecondsTest, PicksTheTwoLargestUnits) {
  EXPECT_EQ(FormatSeconds(0), "0.0s");
  EXPECT_EQ(FormatSeconds(59.94), "59.9s");
  EXPECT_EQ(FormatSeconds(60), "1m00s");
  EXPECT_EQ(FormatSeconds(3599), "59m59s");
  EXPECT_EQ(FormatSeconds(3600), "1h00m");
  EXPECT_EQ(FormatSeconds(90061), "1d01h");
  EXPECT_EQ(FormatSeconds(-1), "-");
  EXPECT_EQ(FormatSeconds(std::numeric_limits<double>::quiet_NaN()), "-");
}

TEST(RenderTableTest, PadsColumnsAndRightAlignsNumbers) {
  EXPECT_EQ(RenderTable({"NAME", "N"}, {false, true}, {{"a", "100"}, {"long-name", "7"}}),
            "NAME         N\n"
            "a          100\n"
            "long-name    7\n");
}

TEST(JsonWriterTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonWriter::Quote("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\u0001\"");
}

TEST(JsonWriterTest, NonFiniteDoublesAreNull) {
  JsonWriter w;
  w.BeginArray()
      .Double(std::numeric_limits<double>::quiet_NaN())
      .Double(std::numeric_limits<double>::infinity())
      .Double(2.5)
      .Double(-0.0)
      .EndArray();
  EXPECT_EQ(w.str(), "[\n  null,\n  null,\n  2.5,\n  0\n]\n");
}

TEST(JsonWriterTest, NestsObjectsAndArraysWithIndentation) {
  JsonWriter w;
  w.BeginObject().Key("a").BeginArray().EndArray().Key("b").BeginObject().Key("c").Int(-1);
  w.EndObject().EndObject();
  EXPECT_EQ(w.str(), "{\n  \"a\": [],\n  \"b\": {\n    \"c\": -1\n  }\n}\n");
}

}  // namespace
}  // namespace kctl
}  // namespace kd
