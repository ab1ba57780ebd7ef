// The page --xla_dump_hlo_as_html writes: one self-contained HTML file (no scripts, no outside
// resources) with the module's graph as inline SVG and its HLO text, so it opens anywhere.
#pragma once

#include <string>
#include <string_view>

#include "compiler/support/status.h"

namespace xlens {

// `svg` is the rendered graph; when rendering failed, the page says why and shows the DOT source
// instead, so nothing is lost.
std::string HloHtmlPage(std::string_view title, std::string_view hlo_text, std::string_view dot,
                        const StatusOr<std::string>& svg);

// Escapes &, <, >, " and ' for HTML text and attribute values.
std::string HtmlEscape(std::string_view text);

}  // namespace xlens
