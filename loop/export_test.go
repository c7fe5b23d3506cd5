package loop_test

import "io"

var errUnexpectedEOF = io.ErrUnexpectedEOF
