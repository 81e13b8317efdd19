-- The TechEmpower Framework Benchmarks' PostgreSQL schema and data: World
-- (10,000 rows of a random number in 1..10,000) and Fortune (12 messages,
-- among them one that must be escaped and one in Japanese), owned by
-- benchmarkdbuser. Loaded into hello_world by scripts/postgres.sh.
BEGIN;
SET ROLE benchmarkdbuser;

CREATE TABLE World (
  id integer NOT NULL PRIMARY KEY,
  randomNumber integer NOT NULL DEFAULT 0
);
INSERT INTO World (id, randomNumber)
  SELECT n, 1 + floor(random() * 10000)::integer FROM generate_series(1, 10000) AS n;

CREATE TABLE Fortune (
  id integer NOT NULL PRIMARY KEY,
  message varchar(2048) NOT NULL
);
INSERT INTO Fortune (id, message) VALUES
  (1, 'fortune: No such file or directory'),
  (2, 'A computer scientist is someone who fixes things that aren''t broken.'),
  (3, 'After enough decimal places, nobody gives a damn.'),
  (4, 'A bad random number generator: 1, 1, 1, 1, 1, 4.33e+67, 1, 1, 1'),
  (5, 'A computer program does what you tell it to do, not what you want it to do.'),
  (6, 'Emacs is a nice operating system, but I prefer UNIX. — Tom Christaensen'),
  (7, 'Any program that runs right is obsolete.'),
  (8, 'A list is only as strong as its weakest link. — Donald Knuth'),
  (9, 'Feature: A bug with seniority.'),
  (10, 'Computers make very fast, very accurate mistakes.'),
  (11, '<script>alert("This should not be displayed in a browser alert box.");</script>'),
  (12, 'フレームワークのベンチマーク');

COMMIT;
