//! Unit tests of the operator loops: hand-fed inputs and a virtual clock.
