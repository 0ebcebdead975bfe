"""`fabnet watch`: audits and link readings again and again over kept sessions, reporting what changed."""
