//! Native tests: the parser on replies as small local models write them,
//! and the step against a fake host.

mod parse;
mod step;
