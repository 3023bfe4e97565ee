// Text that came from outside (file names, URLs, CSV cells, server messages) is bytes,
// and nlohmann's dump() throws on bytes that are not UTF-8. Every JSON framemill emits
// goes through JsonDump, which replaces each invalid sequence with U+FFFD instead; a
// field whose exact bytes matter (an item's path or URL) also gets `<key>_hex` with them,
// so nothing is lost. Stateless; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace framemill {

bool IsValidUtf8(std::string_view s);

// Lower-case hex of every byte ("caf\xe9" -> "636166e9").
std::string HexBytes(std::string_view s);

// dump() that never throws on text: invalid UTF-8 becomes U+FFFD.
std::string JsonDump(const nlohmann::json& j, int indent = -1);

// j[key] = value; when value is not valid UTF-8, also j[key + "_hex"] = HexBytes(value).
void SetBytesField(nlohmann::json& j, const std::string& key, std::string_view value);

}  // namespace framemill
