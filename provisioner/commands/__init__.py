"""fabnet subcommands, one module each."""
