-- One query per line; parse.golden holds the parsed form of each.
SELECT depname, empno, salary, avg(salary) OVER (PARTITION BY depname) FROM empsalary
SELECT depname, empno, salary, rank() OVER (PARTITION BY depname ORDER BY salary DESC) FROM empsalary
SELECT salary, sum(salary) OVER () FROM empsalary
SELECT salary, sum(salary) OVER (ORDER BY salary) FROM empsalary
SELECT sum(salary) OVER w, avg(salary) OVER w FROM empsalary WINDOW w AS (PARTITION BY depname ORDER BY salary DESC)
SELECT a, count(*) OVER (PARTITION BY a) FROM a
SELECT a, count(*) OVER (PARTITION BY a % 1000) FROM a
SELECT g, x, row_number() OVER (PARTITION BY g ORDER BY x), rank() OVER (PARTITION BY g ORDER BY x) FROM t
SELECT sum(x) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) FROM t
SELECT avg(x) OVER (ORDER BY ts RANGE BETWEEN INTERVAL '1 hour' PRECEDING AND CURRENT ROW) FROM t
SELECT min(x) OVER (ORDER BY t ROWS BETWEEN 1000 PRECEDING AND CURRENT ROW) FROM t
SELECT lag(x) OVER (ORDER BY t), lead(x, 2, 0) OVER (ORDER BY t) FROM t
SELECT x, first_value(x) OVER w, last_value(x) OVER w, nth_value(x, 2) OVER w FROM t WINDOW w AS (ORDER BY x GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP)
SELECT x, count(x) FILTER (WHERE x > 0 AND y IS NOT NULL) OVER (ORDER BY x NULLS FIRST RANGE BETWEEN 2.5 PRECEDING AND UNBOUNDED FOLLOWING EXCLUDE CURRENT ROW) FROM t
SELECT ntile(4) OVER (ORDER BY x DESC NULLS LAST), percent_rank() OVER (ORDER BY x), cume_dist() OVER (ORDER BY x) FROM t WHERE x >= -5 ORDER BY x LIMIT 10
SELECT x, dense_rank() OVER (w2) FROM t WINDOW w1 AS (PARTITION BY g), w2 AS (w1 ORDER BY x)
