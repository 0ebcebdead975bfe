"""`fabnet smoke`: prove the fabric with a multi-node all-reduce, find the slow host, name the cause of a hang."""
