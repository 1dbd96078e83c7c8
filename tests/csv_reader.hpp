#pragma once
// A strict RFC 4180 reader for the tests, written apart from the library's writer (report_format.cpp), so a
// writer bug is not mirrored: records end in CRLF, a quoted field may hold commas, CR, LF and doubled quotes.
// Fails the calling test on a bare LF, a quote inside an unquoted field, or text after a closing quote.
#include <doctest.h>

#include <string>
#include <vector>

namespace selfperf::test {

inline std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  std::size_t i = 0;
  bool at_field_start = true;
  while (i < text.size()) {
    if (at_field_start && text[i] == '"') {
      ++i;
      for (;;) {
        REQUIRE_MESSAGE(i < text.size(), "unterminated quoted field");
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += text[i++];
      }
      REQUIRE_MESSAGE((i == text.size() || text[i] == ',' || text[i] == '\r'), "text after a closing quote");
      at_field_start = false;
      continue;
    }
    const char c = text[i];
    if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      at_field_start = true;
      ++i;
    } else if (c == '\r') {
      REQUIRE_MESSAGE((i + 1 < text.size() && text[i + 1] == '\n'), "CR without LF");
      row.push_back(std::move(field));
      field.clear();
      rows.push_back(std::move(row));
      row.clear();
      at_field_start = true;
      i += 2;
    } else {
      REQUIRE_MESSAGE(c != '\n', "a bare LF ends a record: RFC 4180 wants CRLF");
      REQUIRE_MESSAGE(c != '"', "a quote in an unquoted field");
      field += c;
      at_field_start = false;
      ++i;
    }
  }
  REQUIRE_MESSAGE((row.empty() && field.empty() && at_field_start), "the last record lacks its CRLF");
  return rows;
}

}  // namespace selfperf::test
