-- Schema version 7: a per-operator profile row may be a call inside an if/loop (control flow,
-- issue 18): parent_call is the index of the top-level if/loop call whose time includes its own,
-- -1 for a top-level call (and every row stored before).
ALTER TABLE op_profiles ADD COLUMN parent_call INTEGER NOT NULL DEFAULT -1;
