// Enqueue: items and their (item, stage) jobs, set-wise. New items go in all at once
// (storage/bulk_rows.h: COPY on PostgreSQL) with ids reserved beforehand, their jobs stage by
// stage in dependency order (a job's dependencies get their ids first; the videos' jobs
// before the other items', longest first) with the first state DecideFirstState gives;
// items the store knows are compared in memory and written only when their file changed.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <string_view>
#include <unordered_set>

#include "storage/bulk_rows.h"
#include "storage/sql_store_internal.h"

namespace framemill::sql {

template <class Db>
Result<std::unordered_map<std::string, ItemRecord>> SqlEnqueue<Db>::LoadItems() {
  using Items = std::unordered_map<std::string, ItemRecord>;
  return InTxn<Items>(*db_, TxnKind::kRead, [&]() -> Result<Items> {
    Items out;
    FM_PREPARE(q, "SELECT id, source, kind, size, mtime_ns, coalesce(content_hash,'') "
                  "FROM items WHERE kind <> 0");
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      ItemRecord r;
      r.id = q.Int(0);
      r.source = q.Text(1);
      r.kind = static_cast<MediaKind>(q.Int(2));
      r.size = q.Int(3);
      r.mtime_ns = q.Int(4);
      r.content_hash = q.Text(5);
      out.emplace(r.source, std::move(r));
    }
    return out;
  });
}

template <class Db>
Result<EnqueueStats> SqlEnqueue<Db>::Enqueue(const std::vector<NewItem>& items,
                                             const EnqueueOptions& options) {
  for (const std::string& name : options.stages)
    if (graph_->Find(name) == nullptr) return Status::InvalidArgument("unknown stage " + name);
  auto stats = InTxn<EnqueueStats>(*db_, TxnKind::kWrite, [&]() -> Result<EnqueueStats> {
    FM_RETURN_IF_ERROR(LockGraph());
    return EnqueueLocked(items, options);
  });
  if (stats.ok()) RefreshPlannerStatistics(stats->jobs_added);
  return stats;
}

template <class Db>
Result<EnqueueStats> SqlEnqueue<Db>::EnqueueLocked(const std::vector<NewItem>& items,
                                                   const EnqueueOptions& options) {
  EnqueueStats stats;
  const int64_t now = Now();
  std::vector<const NewItem*> all;
  for (const NewItem& it : items) all.push_back(&it);
  // New sources go in first, all at once; the items that did not (the store knew them, or
  // the call names them twice) are compared, in order, as if the items had come one by one.
  auto known = FindItems(all);
  if (!known.ok()) return known.status();
  std::vector<Target> targets;
  std::vector<const NewItem*> known_items;
  FM_RETURN_IF_ERROR(InsertItems(all, *known, now, &targets, &known_items));
  stats.items_added = static_cast<int64_t>(targets.size());
  std::vector<const NewItem*> again;  // second mentions of sources this call inserted
  for (const NewItem* it : known_items)
    if (known->count(it->source) == 0) again.push_back(it);
  auto inserted = FindItems(again);
  if (!inserted.ok()) return inserted.status();
  known->merge(*inserted);
  for (const NewItem* it : known_items)
    FM_RETURN_IF_ERROR(UpdateKnownItem(*it, known->at(it->source), now, &stats, &targets));
  FM_RETURN_IF_ERROR(InsertMissingJobs(targets, options, now, &stats));
  FM_RETURN_IF_ERROR(EnsureDatasetJobs(options, stats.items_added + stats.items_changed > 0));
  // An enqueue that names only upstream stages still gives a finished dataset job new
  // inputs (faces of new items for face_clusters): it must wait for them again.
  FM_RETURN_IF_ERROR(this->RearmDatasetJobs());
  if (stats.jobs_added + stats.jobs_requeued > 0) FM_RETURN_IF_ERROR(Notify());
  FM_RETURN_IF_ERROR(this->PromoteDatasetJobs(now));
  return stats;
}

template <class Db>
Result<std::unordered_map<std::string, typename SqlEnqueue<Db>::KnownItem>>
SqlEnqueue<Db>::FindItems(const std::vector<const NewItem*>& items) {
  std::unordered_map<std::string, KnownItem> out;
  Status s = ForEachChunk(items.size(), [&](size_t first, size_t count) -> Status {
    FM_PREPARE(q, "SELECT id, source, coalesce(content_hash, ''),"
                  " CASE WHEN content_hash IS NULL THEN 1 ELSE 0 END, kind, is_url, size,"
                  " mtime_ns FROM items WHERE source IN (" + Placeholders(count) + ")");
    for (size_t k = 0; k < count; ++k) q.Bind(static_cast<int>(k + 1), items[first + k]->source);
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      KnownItem r;
      r.id = q.Int(0);
      r.content_hash = q.Text(2);
      r.hash_null = q.Int(3) != 0;
      r.kind = static_cast<MediaKind>(q.Int(4));
      r.is_url = q.Int(5) != 0;
      r.size = q.Int(6);
      r.mtime_ns = q.Int(7);
      out.emplace(q.Text(1), std::move(r));
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  return out;
}

template <class Db>
Status SqlEnqueue<Db>::InsertItems(const std::vector<const NewItem*>& items,
                                   const std::unordered_map<std::string, KnownItem>& known,
                                   int64_t now, std::vector<Target>* targets,
                                   std::vector<const NewItem*>* not_inserted) {
  // Enqueues hold the graph lock: no other can insert a source between the look-up and here.
  std::vector<const NewItem*> fresh;
  std::unordered_set<std::string_view> seen;
  for (const NewItem* it : items) {
    if (known.count(it->source) == 0 && seen.insert(it->source).second) fresh.push_back(it);
    else not_inserted->push_back(it);
  }
  auto ids = ReserveIds(*db_, "items", fresh.size());
  if (!ids.ok()) return ids.status();
  for (size_t k = 0; k < fresh.size(); ++k)
    targets->push_back({(*ids)[k], fresh[k]->kind, fresh[k]->is_url, true});
  return WriteRows(*db_, "items", "id, source, kind, size, mtime_ns, content_hash, media_info,"
                   " created_at, updated_at, is_url, metadata", fresh.size(),
                   [&](size_t k, RowSink& row) {
    const NewItem& it = *fresh[k];
    row.Int((*ids)[k]).Text(it.source).Int(static_cast<int>(it.kind)).Int(it.size).Int(it.mtime_ns);
    if (it.is_url) row.Null(); else row.Text(it.content_hash);
    row.Text(it.media_info).Int(now).Int(now).Int(it.is_url ? 1 : 0);
    if (it.is_url) row.Text(it.metadata); else row.Null();
  });
}

template <class Db>
Status SqlEnqueue<Db>::UpdateKnownItem(const NewItem& it, KnownItem& row, int64_t now,
                                       EnqueueStats* stats, std::vector<Target>* targets) {
  if (it.is_url || row.is_url) {
    // Known by its URL: the content is whatever its fetch found (or will find).
    ++stats->items_unchanged;
    targets->push_back({row.id, row.kind, row.is_url, false});
    return Status::OK();
  }
  const bool changed = row.content_hash != it.content_hash || row.kind != it.kind;
  if (changed || row.hash_null || row.size != it.size || row.mtime_ns != it.mtime_ns) {
    FM_PREPARE(up, "UPDATE items SET kind = ?, size = ?, mtime_ns = ?, content_hash = ?,"
                   " media_info = ?, updated_at = ? WHERE id = ?");
    FM_RETURN_IF_ERROR(up.Bind(1, static_cast<int>(it.kind)).Bind(2, it.size)
                           .Bind(3, it.mtime_ns).Bind(4, it.content_hash)
                           .Bind(5, it.media_info).Bind(6, now).Bind(7, row.id).Run());
    row.kind = it.kind;  // as a later mention of the same source will find it
    row.size = it.size;
    row.mtime_ns = it.mtime_ns;
    row.content_hash = it.content_hash;
    row.hash_null = false;
  }
  if (changed) {
    ++stats->items_changed;
    FM_RETURN_IF_ERROR(RequeueItemJobs(row.id, it.kind, stats));
  } else {
    ++stats->items_unchanged;
  }
  targets->push_back({row.id, it.kind, false, false});
  return Status::OK();
}

template <class Db>
Result<int64_t> SqlEnqueue<Db>::JobState_(int64_t item_id, const std::string& stage,
                                          int* state) {
  FM_PREPARE(q, "SELECT id, state FROM jobs WHERE item_id = ? AND stage = ?");
  q.Bind(1, item_id).Bind(2, stage);
  FM_STEP(row, q.Step());
  if (!row) return Status::NotFound("no job for stage " + stage);
  *state = static_cast<int>(q.Int(1));
  return q.Int(0);
}

template <class Db>
Status SqlEnqueue<Db>::RequeueItemJobs(int64_t item_id, MediaKind kind, EnqueueStats* stats) {
  // Results describe the old content: drop them. The error history stays.
  FM_PREPARE(del, "DELETE FROM results WHERE job_id IN (SELECT id FROM jobs WHERE item_id = ?)");
  FM_RETURN_IF_ERROR(del.Bind(1, item_id).Run());
  // Dependency order, so a dependant sees its dependencies' new states.
  for (const StageSpec& spec : graph_->stages()) {
    if (spec.dataset_level) continue;
    int state = 0;
    auto job = JobState_(item_id, spec.name, &state);
    if (!job.ok()) {
      if (job.status().IsNotFound()) continue;
      return job.status();
    }
    int to = spec.deps.empty() ? kPending : kWaiting;
    std::string reason;
    // Dependencies were requeued earlier in this loop: one that is skipped now (does not
    // apply to this kind) skips this job too, or it would wait forever.
    for (const std::string& d : spec.deps) {
      int dep_state = 0;
      auto dep = JobState_(item_id, d, &dep_state);
      if (!dep.ok()) {
        if (dep.status().IsNotFound()) continue;
        return dep.status();
      }
      if (dep_state == kSkipped) {
        to = kSkipped;
        reason = "dependency " + d + " was skipped";
      }
    }
    if (!spec.AppliesTo(kind)) {
      to = kSkipped;
      reason = spec.name + " does not apply to " + std::string(MediaKindName(kind)) + " items";
    }
    FM_PREPARE(up,
               "UPDATE jobs SET state = ?, attempts = 0, next_run_at = 0, lease_owner = NULL,"
               " lease_token = NULL, lease_expires_at = NULL, started_at = NULL,"
               " finished_at = ?, device = NULL, error_class = ?, last_error = ? WHERE id = ?");
    up.Bind(1, to);
    if (reason.empty()) {
      up.BindNull(2).BindNull(3).BindNull(4);
    } else {
      up.Bind(2, Now()).Bind(3, "not_applicable").Bind(4, reason);
    }
    FM_RETURN_IF_ERROR(up.Bind(5, *job).Run());
    ++stats->jobs_requeued;
    if (to == kSkipped) {
      FM_RETURN_IF_ERROR(this->CascadeTerminal(*job, JobState::kSkipped, "not_applicable",
                                               "dependency " + spec.name + " was skipped",
                                               Now()));
    }
  }
  return Status::OK();
}

template <class Db>
Result<typename SqlEnqueue<Db>::JobsByItem> SqlEnqueue<Db>::LoadJobs(
    const std::vector<Target>& targets) {
  JobsByItem jobs;
  std::vector<int64_t> known;
  for (const Target& t : targets) {
    jobs[t.item_id];
    if (!t.is_new) known.push_back(t.item_id);
  }
  std::sort(known.begin(), known.end());
  known.erase(std::unique(known.begin(), known.end()), known.end());
  Status s = ForEachChunk(known.size(), [&](size_t first, size_t count) -> Status {
    FM_PREPARE(q, "SELECT item_id, stage, id, state FROM jobs WHERE item_id IN (" +
                      Placeholders(count) + ")");
    for (size_t k = 0; k < count; ++k) q.Bind(static_cast<int>(k + 1), known[first + k]);
    for (;;) {
      FM_STEP(row, q.Step());
      if (!row) break;
      jobs[q.Int(0)][q.Text(1)] = {q.Int(2), static_cast<JobState>(q.Int(3))};
    }
    return Status::OK();
  });
  if (!s.ok()) return s;
  return jobs;
}

template <class Db>
Status SqlEnqueue<Db>::InsertMissingJobs(const std::vector<Target>& targets,
                                         const EnqueueOptions& options, int64_t now,
                                         EnqueueStats* stats) {
  // The same item may be a target twice (a source given twice): its last mention counts.
  std::vector<Target> unique;
  std::unordered_map<int64_t, size_t> at;
  for (const Target& t : targets) {
    auto [it, added] = at.emplace(t.item_id, unique.size());
    if (added) unique.push_back(t);
    else unique[it->second] = {t.item_id, t.kind, t.is_url, unique[it->second].is_new || t.is_new};
  }
  auto jobs = LoadJobs(unique);
  if (!jobs.ok()) return jobs.status();
  // A URL item's jobs all wait on its download job; what applies to it is known only
  // once the download has found out whether it is an image or a video.
  const StageSpec* downloader = graph_->Downloader();
  std::vector<NewJob> downloads;
  for (const Target& t : unique) {
    if (!t.is_url) continue;
    if (downloader == nullptr)
      return Status::InvalidArgument(
          "URL items need a downloading stage (fetch), which this stage graph does not have");
    if ((*jobs)[t.item_id].count(downloader->name) == 0) downloads.push_back({t.item_id, {}, {}});
  }
  if (!downloads.empty())
    FM_RETURN_IF_ERROR(InsertJobs(downloader->name, downloads, options, now, &*jobs, stats));
  // Every job of the videos first, then the rest stage by stage: jobs are claimed in id
  // order, and a video's jobs are the longest (a 795-frame video's pose ran 127 s on one
  // thread), so they start while the photos' short ones are left to fill the workers' gaps
  // at the end, instead of running alone after them (bench/README.md, "One device, many
  // workers"). Within each group, stage by stage keeps a stage's jobs together for batching.
  const auto videos_end = std::stable_partition(
      unique.begin(), unique.end(), [](const Target& t) { return t.kind == MediaKind::kVideo; });
  for (auto [from, to] : {std::pair{unique.begin(), videos_end}, std::pair{videos_end, unique.end()}}) {
    for (const std::string& name : options.stages) {
      const StageSpec* spec = graph_->Find(name);
      if (spec->dataset_level || spec->downloads) continue;  // downloads: URL items, above
      std::vector<NewJob> rows;
      rows.reserve(static_cast<size_t>(to - from));
      for (auto t = from; t != to; ++t) {
        const auto& has = (*jobs)[t->item_id];
        if (has.count(name) > 0) continue;
        auto row = PlanJob(*spec, *t, has, downloader);
        if (!row.ok()) return row.status();
        rows.push_back(std::move(row).value());
      }
      FM_RETURN_IF_ERROR(InsertJobs(name, rows, options, now, &*jobs, stats));
    }
  }
  return Status::OK();
}

template <class Db>
Result<typename SqlEnqueue<Db>::NewJob> SqlEnqueue<Db>::PlanJob(
    const StageSpec& spec, const Target& t, const std::map<std::string, JobRef>& has,
    const StageSpec* downloader) {
  NewJob row{t.item_id, {}, {}};
  std::optional<JobState> download;
  if (t.is_url) {
    const JobRef& fetch = has.at(downloader->name);
    row.deps.push_back(fetch.id);
    download = fetch.state;
  }
  // Dependencies come earlier in options.stages (dependency order), so they exist.
  std::vector<DependencyNow> now_in;
  for (const std::string& d : spec.deps) {
    auto dep = has.find(d);
    if (dep == has.end()) return Status::NotFound("no job for stage " + d);
    row.deps.push_back(dep->second.id);
    now_in.push_back({d, dep->second.state});
  }
  row.first = DecideFirstState(spec, t.kind, download, now_in);
  return row;
}

template <class Db>
Status SqlEnqueue<Db>::InsertJobs(const std::string& stage, const std::vector<NewJob>& rows,
                                  const EnqueueOptions& options, int64_t now, JobsByItem* jobs,
                                  EnqueueStats* stats) {
  auto ids = ReserveIds(*db_, "jobs", rows.size());
  if (!ids.ok()) return ids.status();
  std::vector<std::pair<int64_t, int64_t>> deps;  // (job, dependency)
  for (size_t k = 0; k < rows.size(); ++k) {
    const NewJob& r = rows[k];
    (*jobs)[r.item_id][stage] = {(*ids)[k], r.first.state};
    if (r.first.state == JobState::kSkipped) ++stats->jobs_not_applicable;
    for (int64_t d : r.deps) deps.emplace_back((*ids)[k], d);
  }
  FM_RETURN_IF_ERROR(WriteRows(*db_, "jobs", "id, item_id, stage, state, priority, max_attempts,"
                               " created_at, error_class, last_error, finished_at", rows.size(),
                               [&](size_t k, RowSink& row) {
    const NewJob& r = rows[k];
    row.Int((*ids)[k]).Int(r.item_id).Text(stage).Int(static_cast<int>(r.first.state))
        .Int(options.priority).Int(options.max_attempts).Int(now);
    if (r.first.reason.empty()) row.Null().Null().Null();
    else row.Text(r.first.error_class).Text(r.first.reason).Int(now);
  }));
  stats->jobs_added += static_cast<int64_t>(rows.size());
  return WriteRows(*db_, "job_deps", "job_id, dep_id", deps.size(), [&](size_t k, RowSink& row) {
    row.Int(deps[k].first).Int(deps[k].second);
  });
}

template <class Db>
Status SqlEnqueue<Db>::EnsureDatasetJobs(const EnqueueOptions& options, bool items_arrived) {
  const int64_t now = Now();
  bool any = false;
  for (const std::string& name : options.stages) any |= graph_->Find(name)->dataset_level;
  if (!any) return Status::OK();
  FM_PREPARE(item, "INSERT INTO items (source, kind, created_at, updated_at) VALUES (?, 0, ?, ?)"
                   " ON CONFLICT (source) DO NOTHING");
  FM_RETURN_IF_ERROR(item.Bind(1, kDatasetSource).Bind(2, now).Bind(3, now).Run());
  FM_PREPARE(find, "SELECT id FROM items WHERE source = ?");
  find.Bind(1, kDatasetSource);
  FM_STEP(row, find.Step());
  if (!row) return Status::Internal("dataset item missing");
  int64_t dataset_item = find.Int(0);
  for (const std::string& name : options.stages) {
    if (!graph_->Find(name)->dataset_level) continue;
    FM_PREPARE(ins, "INSERT INTO jobs (item_id, stage, state, priority, max_attempts, created_at)"
                    " VALUES (?,?," S_WAITING ",?,?,?) ON CONFLICT (item_id, stage) DO NOTHING");
    FM_RETURN_IF_ERROR(ins.Bind(1, dataset_item).Bind(2, name)
                           .Bind(3, options.priority).Bind(4, options.max_attempts)
                           .Bind(5, now).Run());
    if (items_arrived) {
      // New data: run the dataset stage again. Its previous result stays until the new
      // one replaces it, so it can work incrementally. A pending job waits again for the
      // new items' jobs; a running one cannot have seen them, so it loses its lease (its
      // completion is then stale) and runs again too.
      FM_PREPARE(re, "UPDATE jobs SET state = " S_WAITING ", attempts = 0, next_run_at = 0,"
                     " lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL,"
                     " error_class = NULL, last_error = NULL"
                     " WHERE item_id = ? AND stage = ? AND state <> " S_WAITING);
      FM_RETURN_IF_ERROR(re.Bind(1, dataset_item).Bind(2, name).Run());
    }
  }
  return Status::OK();
}

template <class Db>
void SqlEnqueue<Db>::RefreshPlannerStatistics(int64_t jobs_added) {
  if constexpr (std::is_same_v<Db, PgDb>) {
    if (jobs_added < 1000) return;
    auto q = db_->Prepare("SELECT reltuples FROM pg_class WHERE oid = 'jobs'::regclass");
    if (!q.ok() || !q->Step().ok()) return;
    const double known = q->Double(0);  // -1: never analysed
    if (known >= 0 && static_cast<double>(jobs_added) < 0.1 * known) return;
    if (Status a = db_->Exec("ANALYZE jobs"); !a.ok())
      spdlog::warn("ANALYZE jobs after an enqueue: {}", a.ToString());
  }
}

template class SqlEnqueue<SqliteDb>;
template class SqlEnqueue<PgDb>;

}  // namespace framemill::sql
