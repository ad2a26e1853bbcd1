-- How far each org's texts have been emptied by retention (epoch ms): a pass reads only the rows after it.
CREATE TABLE IF NOT EXISTS retention_marks (
  org_id VARCHAR PRIMARY KEY,
  texts_before BIGINT NOT NULL
);
