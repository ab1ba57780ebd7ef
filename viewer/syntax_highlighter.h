// Colours the texts the Details pane shows: HLO, LLVM IR and PTX. Token classes only (names,
// opcodes/instructions, types, numbers, comments, strings), so a reader finds their way in a
// kernel of a thousand lines; no parsing, so a broken file colours as well as it can.
#pragma once

#include <QRegularExpression>
#include <QSyntaxHighlighter>
#include <QTextCharFormat>
#include <vector>

namespace xlens::viewer {

enum class SourceLanguage { kHlo, kLlvmIr, kPtx, kPlain };

// The language of a dump file, by its name (".ll", ".ptx", else HLO for ".txt").
SourceLanguage LanguageOfFile(const QString& file_name);

class SyntaxHighlighter : public QSyntaxHighlighter {
  Q_OBJECT
 public:
  SyntaxHighlighter(QTextDocument* document, SourceLanguage language);
  void SetLanguage(SourceLanguage language);
  SourceLanguage language() const { return language_; }

 protected:
  void highlightBlock(const QString& text) override;

 private:
  struct Rule {
    QRegularExpression pattern;
    QTextCharFormat format;
  };
  void BuildRules();

  SourceLanguage language_;
  std::vector<Rule> rules_;
  QRegularExpression comment_;
  QTextCharFormat comment_format_;
};

}  // namespace xlens::viewer
