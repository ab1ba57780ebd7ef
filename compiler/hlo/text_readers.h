// Readers for the structured pieces of HLO text (shapes, layouts, literals, windows, padding,
// slices, dim_labels, metadata, integer lists), on a TextCursor. The parser composes them.
#pragma once

#include <vector>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/shape.h"
#include "compiler/hlo/text_cursor.h"

namespace xlens::text {

// True when the cursor is at a shape: '(' (tuple) or a type name directly followed by '['.
bool AtShape(TextCursor& cursor);
// A shape; array shapes without a layout get the default one, as XLA's parser does. A shape
// whose element count or byte size does not fit in int64 is an error; `owner` ("%add.1"), when
// given, is named in it.
StatusOr<Shape> ReadShape(TextCursor& cursor, std::string_view owner = {});
// A literal of `shape`: a scalar, nested {...} arrays, (re, im) complex values, (a, b) tuples,
// or the elided form {...}.
StatusOr<Literal> ReadLiteral(TextCursor& cursor, const Shape& shape);

// {1,2,3} or {}.
StatusOr<std::vector<int64_t>> ReadIntList(TextCursor& cursor, std::string_view what);
// {[0:4], [1:9:2]}
Status ReadSlice(TextCursor& cursor, std::vector<int64_t>& starts, std::vector<int64_t>& limits,
                 std::vector<int64_t>& strides);
// {size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}
StatusOr<Window> ReadWindow(TextCursor& cursor);
// 0_0x1_1 or 0_0_1x...
StatusOr<PaddingConfig> ReadPaddingConfig(TextCursor& cursor);
// b01f_01io->b01f
StatusOr<ConvolutionDimensionNumbers> ReadDimLabels(TextCursor& cursor);
// {op_type="..." op_name="..." source_file="..." source_line=N ...}
StatusOr<OpMetadata> ReadMetadata(TextCursor& cursor);
// true or false.
StatusOr<bool> ReadBool(TextCursor& cursor, std::string_view what);

}  // namespace xlens::text
