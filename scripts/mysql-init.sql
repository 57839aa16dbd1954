-- docker-compose.yml's MariaDB runs this once, at its first start, as
-- scripts/backends does for its own: locker_nolane may use the tables but
-- run no procedure of theirs (the SQL adapter's fast lane then turns itself
-- off: TestFastLaneNotThisUsers).
CREATE USER IF NOT EXISTS 'locker_nolane'@'%' IDENTIFIED BY 'nolane-pw';
GRANT SELECT, INSERT, UPDATE, DELETE, CREATE, ALTER, INDEX ON locker.* TO 'locker_nolane'@'%';
