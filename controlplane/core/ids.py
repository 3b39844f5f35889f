# The largest id a BigAutoField holds on SQLite and PostgreSQL. URL converters and form fields accept
# larger integers, which the database answers with an overflow error (a 500) instead of "not found".
MAX_DB_ID = 2**63 - 1
