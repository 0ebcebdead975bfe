"""One module per CLI command that is big enough to have its own."""
