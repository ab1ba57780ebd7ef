#include "compiler/support/terminal_text.h"

#include <gtest/gtest.h>

namespace xlens {
namespace {

TEST(TerminalTextTest, ControlCharactersAreEscaped) {
  EXPECT_EQ(EscapeForTerminal("plain name"), "plain name");
  EXPECT_EQ(EscapeForTerminal(std::string_view("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeForTerminal("\x1b[2J\x1b]0;owned\x07"), "\\x1b[2J\\x1b]0;owned\\x07");
  EXPECT_EQ(EscapeForTerminal("line\nnext\ttab\r"), "line\\nnext\\ttab\\r");
  EXPECT_EQ(EscapeForTerminal("\x7f"), "\\x7f");
}

TEST(TerminalTextTest, Utf8IsKeptAndInvalidBytesEscaped) {
  EXPECT_EQ(EscapeForTerminal("µs → naïve 漢字 🙂"), "µs → naïve 漢字 🙂");
  EXPECT_EQ(EscapeForTerminal("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(EscapeForTerminal("\xc3"), "\\xc3");                  // truncated sequence
  EXPECT_EQ(EscapeForTerminal("\xc0\xaf"), "\\xc0\\xaf");         // overlong '/'
  EXPECT_EQ(EscapeForTerminal("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b" "31m"), "\\u009b31m");     // C1 CSI
}

TEST(TerminalTextTest, TruncationNeverCutsACharacter) {
  std::string text = "ab漢字";  // 2 + 3 + 3 bytes
  EXPECT_EQ(TruncateUtf8(text, 100), text);
  EXPECT_EQ(TruncateUtf8(text, 2), "ab");
  EXPECT_EQ(TruncateUtf8(text, 3), "ab");
  EXPECT_EQ(TruncateUtf8(text, 4), "ab");
  EXPECT_EQ(TruncateUtf8(text, 5), "ab漢");
  EXPECT_EQ(TruncateUtf8(text, 7), "ab漢");
}

TEST(TerminalTextTest, LongPathsAreShortenedOnCharacterBoundaries) {
  std::string path = "/tmp/" + std::string(300, 'x') + "/漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字漢字.hlo";
  std::string shown = DisplayPath(path);
  EXPECT_LT(shown.size(), 260u);
  EXPECT_NE(shown.find("..."), std::string::npos);
  EXPECT_EQ(EscapeForTerminal(shown), shown) << "no character was cut in half";
  EXPECT_NE(shown.find(".hlo"), std::string::npos) << "the end of the path is kept";
}

TEST(TerminalTextTest, ElideMiddleKeepsBothEndsAndSaysHowLongTheTextWas) {
  EXPECT_EQ(ElideMiddle("short", 10), "short");
  std::string name = "instruction does not exist: " + std::string(1 << 20, 'n') + "漢";
  std::string shown = ElideMiddle(name, 100);
  EXPECT_LT(shown.size(), 140u);
  EXPECT_EQ(shown.rfind("instruction does not exist: ", 0), 0u);
  EXPECT_NE(shown.find("(1048607 bytes)"), std::string::npos) << shown;
  EXPECT_EQ(shown.substr(shown.size() - 3), "漢");
  EXPECT_EQ(EscapeForTerminal(shown), shown) << "no character was cut in half";
}

TEST(TerminalTextTest, LongValuesAreCutAndSayHowLongTheyWere) {
  EXPECT_EQ(DisplayText("short\x1b[2J"), "short\\x1b[2J");
  EXPECT_EQ(DisplayText(std::string("a\nb")), "a\\nb");
  std::string shown = DisplayText("ab漢字" + std::string(5000, 'x'), 4);
  EXPECT_EQ(shown, "ab... (5008 bytes)");
  EXPECT_EQ(DisplayText(std::string(10, 'm'), 10), std::string(10, 'm'));
}

}  // namespace
}  // namespace xlens
