// Input for the style.function_lengths_* tests (not compiled): with --limit 6
// only `seven_lines` and `Widget::seven_line_method` are over the limit; braces in
// comments, strings, characters and lambdas must not confuse the count.
namespace fixture {

int six_lines(int x) {
  const char* text = "}}}";  // }}
  const char brace = '{';
  auto twice = [](int y) { return 2 * y; };
  return twice(x) + text[0] + brace;
}

int seven_lines(int x) {
  /* { */
  int y = x;
  y += 1;
  y += 2;
  return y;
}

struct Widget {
  int short_method() const { return 1; }
  int seven_line_method() const {
    int total = 0;
    for (int i = 0; i < 3; ++i) {
      total += i;
    }
    return total;
  }
};

}  // namespace fixture
