// Fuzz target: the tuning-record reader (core/tune/records.h) on a whole file, and the best
// configurations picked from what it read. Every record that reads must serialize and parse back.
#include "core/tune/records.h"
#include "tests/fuzz/fuzz_target.h"

namespace kiln::fuzz {

void records(const uint8_t* data, size_t size) {
  expectOnlyUserErrors("records", [&] {
    std::string path = writeScratchFile(".jsonl", data, size);
    core::tune::RecordFile file = core::tune::readRecords(path);
    core::tune::bestConfigs(file.records, "");
    for (const core::tune::TuneRecord& r : file.records) {
      std::string line = core::tune::recordJson(r), why;
      core::tune::TuneRecord back;
      if (!core::tune::parseRecord(line, back, &why))
        throw FuzzFailure("records: a record read from the file does not parse back (" + why + "): " + line);
      if (core::tune::recordJson(back) != line)
        throw FuzzFailure("records: a record changed in a write/read round trip: " + line);
    }
  });
}

}  // namespace kiln::fuzz

KILN_FUZZ_ENTRY(kiln::fuzz::records)
