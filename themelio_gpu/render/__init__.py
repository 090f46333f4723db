"""Pure renderers: a plan (or the inputs' models) in, plain data or text out, with no cdktf and no files
written. The constructs, the synthesis and the tools above all call them; they import nothing above plan/."""
