#include "viewer/syntax_highlighter.h"

namespace xlens::viewer {
namespace {

QTextCharFormat Format(const char* colour, bool bold = false) {
  QTextCharFormat format;
  format.setForeground(QColor(colour));
  if (bold) format.setFontWeight(QFont::Bold);
  return format;
}

}  // namespace

SourceLanguage LanguageOfFile(const QString& file_name) {
  if (file_name.endsWith(".ll")) return SourceLanguage::kLlvmIr;
  if (file_name.endsWith(".ptx")) return SourceLanguage::kPtx;
  if (file_name.endsWith(".txt")) return SourceLanguage::kHlo;
  return SourceLanguage::kPlain;
}

SyntaxHighlighter::SyntaxHighlighter(QTextDocument* document, SourceLanguage language)
    : QSyntaxHighlighter(document), language_(language) {
  BuildRules();
}

void SyntaxHighlighter::SetLanguage(SourceLanguage language) {
  if (language == language_) return;
  language_ = language;
  BuildRules();
  rehighlight();
}

void SyntaxHighlighter::BuildRules() {
  rules_.clear();
  const QTextCharFormat name = Format("#0b6e99");
  const QTextCharFormat keyword = Format("#7b1fa2", true);
  const QTextCharFormat type = Format("#2e7d32");
  const QTextCharFormat number = Format("#c62828");
  const QTextCharFormat string = Format("#8d6e00");
  const QTextCharFormat attribute = Format("#5d4037");
  auto add = [&](const char* pattern, const QTextCharFormat& format) {
    rules_.push_back({QRegularExpression(pattern), format});
  };
  switch (language_) {
    case SourceLanguage::kHlo:
      add(R"(\b(?:pred|s4|s8|s16|s32|s64|u4|u8|u16|u32|u64|f16|bf16|f32|f64|c64|c128|f8e4m3fn|f8e5m2|token)\[[^\]]*\](?:\{[^}]*\})?)", type);
      add(R"(\b(?:HloModule|ENTRY|ROOT)\b)", keyword);
      add(R"(=\s*[^\s(]+\s+([a-z][a-z0-9-]*)\()", keyword);
      add(R"(\b[a-z_]+(?==))", attribute);
      add(R"(%[A-Za-z0-9_.\-]+)", name);
      add(R"(\b-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?\b)", number);
      add(R"("(?:[^"\\]|\\.)*")", string);
      comment_ = QRegularExpression(R"(/\*.*?\*/|//.*$)");
      break;
    case SourceLanguage::kLlvmIr:
      add(R"(\b(?:define|declare|ret|br|call|load|store|getelementptr|inbounds|phi|icmp|fcmp|select|alloca|add|sub|mul|fadd|fsub|fmul|fdiv|shl|lshr|and|or|xor|zext|sext|trunc|bitcast|fpext|fptrunc|sitofp|uitofp|fptosi|switch|label|align|nsw|nuw|fast|tail|attributes|target|datalayout|triple)\b)", keyword);
      add(R"(\b(?:void|i1|i8|i16|i32|i64|i128|half|bfloat|float|double|ptr|<\d+ x [a-z0-9]+>)\b)", type);
      add(R"([%@][A-Za-z0-9_.\-$]+)", name);
      add(R"(\b-?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?\b|0x[0-9A-Fa-f]+)", number);
      add(R"("(?:[^"\\]|\\.)*")", string);
      add(R"(![A-Za-z0-9_.]+|#[0-9]+)", attribute);
      comment_ = QRegularExpression(R"(;.*$)");
      break;
    case SourceLanguage::kPtx:
      add(R"(^\s*(?:@!?%p\d+\s+)?[a-z][a-z0-9]*(?:\.[a-z0-9]+)*)", keyword);
      add(R"(\.(?:visible|entry|func|param|reg|shared|global|local|const|version|target|address_size|align|maxntid|reqntid)\b)", attribute);
      add(R"(%[A-Za-z0-9_.]+)", name);
      add(R"(\b-?[0-9]+(?:\.[0-9]+)?\b|0[fFdDxX][0-9A-Fa-f]+)", number);
      comment_ = QRegularExpression(R"(//.*$)");
      break;
    case SourceLanguage::kPlain:
      comment_ = QRegularExpression();
      break;
  }
  comment_format_ = Format("#757575");
  comment_format_.setFontItalic(true);
}

void SyntaxHighlighter::highlightBlock(const QString& text) {
  for (const Rule& rule : rules_) {
    QRegularExpressionMatchIterator it = rule.pattern.globalMatch(text);
    while (it.hasNext()) {
      QRegularExpressionMatch match = it.next();
      // A rule with a group colours the group only (the opcode after "= shape").
      int group = match.lastCapturedIndex() >= 1 ? 1 : 0;
      setFormat(match.capturedStart(group), match.capturedLength(group), rule.format);
    }
  }
  if (comment_.isValid() && !comment_.pattern().isEmpty()) {
    QRegularExpressionMatchIterator it = comment_.globalMatch(text);
    while (it.hasNext()) {
      QRegularExpressionMatch match = it.next();
      setFormat(match.capturedStart(), match.capturedLength(), comment_format_);
    }
  }
}

}  // namespace xlens::viewer
