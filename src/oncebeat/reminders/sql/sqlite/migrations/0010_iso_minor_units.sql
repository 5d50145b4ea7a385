-- 0010 (reminders line): amounts are stored in ISO 4217 minor units (issue 22 item 8; reminders/money.py), no
-- longer in CLDR's display digits, which Babel used before: CLDR gives 0 digits for currencies whose coins are
-- out of use although ISO 4217 (and every processor, Stripe included) keeps their minor unit.
--
-- Rescaled here: the currencies for which every Babel this project allowed (2.14 to 2.19) gave 0 digits while
-- ISO 4217 gives 2 (IQD: 3), so every stored amount of theirs is in whole units: x100 (x1000) is exact.
-- Not touched: HUF, IDR and COP (Babel 2.14 gave 2 digits, later releases 0) and RSD (2.14 gave 0, later 2): a
-- stored amount of theirs may be in either unit, and no column says which. README ("Upgrading to ISO 4217 minor
-- units") tells the operator how to check them.
UPDATE invoices SET amount_due = amount_due * 100
WHERE currency IN ('AFN', 'ALL', 'IRR', 'KPW', 'LAK', 'LBP', 'MGA', 'MMK', 'SOS', 'SYP', 'YER');
UPDATE invoices SET amount_due = amount_due * 1000 WHERE currency = 'IQD';
