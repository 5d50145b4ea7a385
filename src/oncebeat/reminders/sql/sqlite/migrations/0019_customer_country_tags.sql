-- reminders 0019: a customer's country (ISO 3166-1 alpha-2, upper case; '' unknown) and tags (lower-case words
-- joined by ';', sorted, no duplicates; '' none), which [[ladders]] rules match (country, tags_any).
ALTER TABLE customers ADD COLUMN country TEXT NOT NULL DEFAULT '';
ALTER TABLE customers ADD COLUMN tags TEXT NOT NULL DEFAULT '';
