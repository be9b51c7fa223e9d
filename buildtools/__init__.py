"""Build-time helpers for fastdeflate (not installed): engine choice, bundled zlib-ng."""
