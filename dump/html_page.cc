#include "dump/html_page.h"

#include <fmt/format.h>

namespace xlens {

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string HloHtmlPage(std::string_view title, std::string_view hlo_text, std::string_view dot,
                        const StatusOr<std::string>& svg) {
  std::string graph;
  if (svg.ok()) {
    graph = fmt::format("<div class=\"graph\">\n{}\n</div>\n", *svg);
  } else {
    graph = fmt::format(
        "<p class=\"note\">The graph could not be drawn ({}). Install Graphviz for a picture; "
        "its DOT source follows (render it with <code>dot -Tsvg</code>).</p>\n"
        "<pre class=\"dot\">{}</pre>\n",
        HtmlEscape(svg.status().message()), HtmlEscape(dot));
  }
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>{0}</title>\n<style>\n"
      "body {{ font-family: sans-serif; margin: 1em 2em; }}\n"
      ".graph {{ overflow: auto; border: 1px solid #ccc; max-height: 90vh; }}\n"
      ".note {{ background: #fff4ce; padding: 0.5em; }}\n"
      "pre {{ background: #f6f8fa; padding: 0.5em; overflow: auto; font-size: 12px; }}\n"
      "</style>\n</head>\n<body>\n<h1>{0}</h1>\n<h2>Graph</h2>\n{1}<h2>HLO</h2>\n"
      "<pre class=\"hlo\">{2}</pre>\n</body>\n</html>\n",
      HtmlEscape(title), graph, HtmlEscape(hlo_text));
}

}  // namespace xlens
