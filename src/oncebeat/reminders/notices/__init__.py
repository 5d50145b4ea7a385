"""What the customer receives, and the proof of it: the frozen message's facts (:mod:`.digest`) and the
proof-of-notice record of one invoice (:mod:`.evidence`, as JSON and as a PDF in :mod:`.evidence_pdf`)."""
