"""What a reminder carries beyond its text, and the proof of it.

Modules: ``attachments`` (the ``[attachments]`` policy, reading an invoice PDF safely from its folder, the
multipart/mixed wrapping of a built message, and reading the parts back), ``statement`` (a statement of
account per customer rendered to PDF with WeasyPrint), ``sending`` (the send job's hooks: attach before the
freeze, record what was frozen; the dashboard's reads), ``digest`` (the frozen message's facts: SHA-256, size,
headers) and ``evidence`` / ``evidence_pdf`` (the proof-of-notice record of one invoice, as JSON and as a PDF).
Nothing here sends: the send job freezes the message with its attachments at the first attempt
(:mod:`oncebeat.effects`), so a retry sends the same bytes.
"""
