#include "io/hub_download.h"

#include <curl/curl.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <thread>

#include "base/error.h"
#include "base/json.h"

namespace tachyon::io {

namespace fs = std::filesystem;

namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// ETags arrive as "abc", W/"abc" or abc; the cache names blobs by the bare value.
std::string normalize_etag(std::string etag) {
  if (etag.rfind("W/", 0) == 0) etag = etag.substr(2);
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') etag = etag.substr(1, etag.size() - 2);
  return etag;
}

std::string escape_segments(CURL* curl, const std::string& path, bool keep_slashes) {
  std::string out;
  size_t start = 0;
  for (;;) {
    const size_t slash = keep_slashes ? path.find('/', start) : std::string::npos;
    const std::string part = path.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
    char* esc = curl_easy_escape(curl, part.c_str(), static_cast<int>(part.size()));
    out += esc;
    curl_free(esc);
    if (slash == std::string::npos) break;
    out += "/";
    start = slash + 1;
  }
  return out;
}

struct Response {
  long status = 0;
  std::map<std::string, std::string> headers;  // lower-case names, of the last response in a redirect chain
  std::string body;                            // API answers and error bodies
  std::string effective_url;
  CURLcode code = CURLE_OK;
  std::string curl_error;
};

// One HTTP exchange. `sink`, when set, takes the body of a 2xx answer; `on_first_body` runs
// before its first byte (the status is known then).
class Http {
 public:
  Http(std::string token) : token_(std::move(token)) {
    static std::once_flag once;
    std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
    curl_ = curl_easy_init();
    if (!curl_) throw Error("cannot initialise libcurl");
  }
  ~Http() { curl_easy_cleanup(curl_); }
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;

  CURL* handle() const { return curl_; }

  Response request(const std::string& url, bool head, bool follow, int64_t range_from,
                   const std::function<bool(const char*, size_t)>& sink = nullptr,
                   const std::function<void(long)>& on_first_body = nullptr,
                   const std::function<bool()>& on_tick = nullptr) {
    Response r;
    State state{&r, sink, on_first_body, on_tick, curl_, false};
    curl_easy_reset(curl_);
    curl_easy_setopt(curl_, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl_, CURLOPT_USERAGENT, "tachyon/1 (libcurl)");
    curl_easy_setopt(curl_, CURLOPT_NOBODY, head ? 1L : 0L);
    curl_easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
    curl_easy_setopt(curl_, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl_, CURLOPT_CONNECTTIMEOUT, 30L);
    // A stalled connection (under 1 byte/s for a minute) fails and is resumed by the retry loop.
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl_, CURLOPT_LOW_SPEED_TIME, 60L);
    curl_easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl_, CURLOPT_HEADERFUNCTION, &Http::on_header);
    curl_easy_setopt(curl_, CURLOPT_HEADERDATA, &state);
    curl_easy_setopt(curl_, CURLOPT_WRITEFUNCTION, &Http::on_body);
    curl_easy_setopt(curl_, CURLOPT_WRITEDATA, &state);
    curl_easy_setopt(curl_, CURLOPT_NOPROGRESS, on_tick ? 0L : 1L);
    if (on_tick) {
      curl_easy_setopt(curl_, CURLOPT_XFERINFOFUNCTION, &Http::on_progress);
      curl_easy_setopt(curl_, CURLOPT_XFERINFODATA, &state);
    }
    if (range_from > 0) curl_easy_setopt(curl_, CURLOPT_RANGE, (std::to_string(range_from) + "-").c_str());
    curl_slist* headers = nullptr;
    // curl sends a header set this way only to the host of `url`: a redirect to a CDN host
    // does not carry the token.
    if (!token_.empty()) headers = curl_slist_append(headers, ("Authorization: Bearer " + token_).c_str());
    if (headers) curl_easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    r.code = curl_easy_perform(curl_);
    if (r.code != CURLE_OK) r.curl_error = curl_easy_strerror(r.code);
    curl_easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &r.status);
    char* effective = nullptr;
    curl_easy_getinfo(curl_, CURLINFO_EFFECTIVE_URL, &effective);
    if (effective) r.effective_url = effective;
    curl_slist_free_all(headers);
    return r;
  }

 private:
  struct State {
    Response* response;
    const std::function<bool(const char*, size_t)>& sink;
    const std::function<void(long)>& on_first_body;
    const std::function<bool()>& on_tick;
    CURL* curl;
    bool body_started;
  };
  static size_t on_header(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<State*>(user);
    std::string line(data, size * n);
    while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.pop_back();
    if (line.rfind("HTTP/", 0) == 0) s->response->headers.clear();  // a new response (redirect hop)
    const size_t colon = line.find(':');
    if (colon != std::string::npos) {
      size_t v = colon + 1;
      while (v < line.size() && line[v] == ' ') ++v;
      s->response->headers[lower(line.substr(0, colon))] = line.substr(v);
    }
    return size * n;
  }
  static size_t on_body(char* data, size_t size, size_t n, void* user) {
    auto* s = static_cast<State*>(user);
    long status = 0;
    curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
    if (!s->body_started) {
      s->body_started = true;
      if (s->on_first_body && status >= 200 && status < 300) s->on_first_body(status);
    }
    if (!s->sink || status < 200 || status >= 300) {
      if (s->response->body.size() < (1 << 20)) s->response->body.append(data, size * n);
      return size * n;
    }
    return s->sink(data, size * n) ? size * n : 0;
  }
  static int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* s = static_cast<State*>(user);
    return s->on_tick() ? 0 : 1;
  }

  CURL* curl_;
  std::string token_;
};

// A hub error as a sentence: the status, the hub's X-Error-Message, what to do.
std::string describe_failure(const Response& r, const std::string& what, const std::string& endpoint) {
  if (r.code != CURLE_OK) return fmt::format("{}: {} ({})", what, r.curl_error, r.effective_url);
  std::string msg = fmt::format("{}: HTTP {}", what, r.status);
  if (auto it = r.headers.find("x-error-message"); it != r.headers.end()) msg += ": " + it->second;
  if (r.status == 401)
    msg += fmt::format(" (set HF_TOKEN to a token of {} that may read this repository; private and gated repositories need one)",
                       endpoint);
  else if (r.status == 403)
    msg += " (the repository is gated: accept its license on the hub with the account of HF_TOKEN)";
  else if (r.status == 404)
    msg += " (no such repository, revision or file; check the id, and set HF_TOKEN for private repositories)";
  return msg;
}

// $HF_TOKEN, else the file `huggingface-cli login` writes: $HF_TOKEN_PATH, else $HF_HOME/token,
// else $XDG_CACHE_HOME/huggingface/token, else ~/.cache/huggingface/token.
std::string default_token() {
  if (std::string t = env_or("HF_TOKEN", ""); !t.empty()) return t;
  fs::path file = env_or("HF_TOKEN_PATH", "");
  if (file.empty()) {
    const std::string hf_home = env_or("HF_HOME", "");
    if (!hf_home.empty()) file = fs::path(hf_home) / "token";
    else if (const std::string xdg = env_or("XDG_CACHE_HOME", ""); !xdg.empty()) file = fs::path(xdg) / "huggingface" / "token";
    else file = fs::path(env_or("HOME", "")) / ".cache" / "huggingface" / "token";
  }
  std::error_code ec;
  if (!fs::is_regular_file(file, ec)) return "";
  std::string token = read_file(file.string());
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  return token;
}

bool retryable(const Response& r) { return r.code != CURLE_OK || r.status >= 500 || r.status == 429; }

// sha256 of a file, or git's blob sha1 ("blob <size>\0" + contents), as lower-case hex.
std::string hash_file(const fs::path& path, bool git_blob) {
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), &EVP_MD_CTX_free);
  EVP_DigestInit_ex(ctx.get(), git_blob ? EVP_sha1() : EVP_sha256(), nullptr);
  if (git_blob) {
    const std::string prefix = "blob " + std::to_string(fs::file_size(path)) + std::string(1, '\0');
    EVP_DigestUpdate(ctx.get(), prefix.data(), prefix.size());
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read {}", path.string());
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    EVP_DigestUpdate(ctx.get(), buf.data(), static_cast<size_t>(in.gcount()));
  }
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx.get(), digest, &len);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", digest[i]);
  return hex;
}

// The lock huggingface_hub takes around a blob (.locks/<repo folder>/<etag>.lock, flock), so a
// Python download and ours never write the same .incomplete file at once.
class BlobLock {
 public:
  explicit BlobLock(const fs::path& path) {
    fs::create_directories(path.parent_path());
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd_ < 0 || ::flock(fd_, LOCK_EX) != 0) throw Error("cannot lock {}", path.string());
  }
  ~BlobLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  BlobLock(const BlobLock&) = delete;
  BlobLock& operator=(const BlobLock&) = delete;

 private:
  int fd_ = -1;
};

void link_snapshot(const fs::path& blob, const fs::path& link) {
  fs::create_directories(link.parent_path());
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_symlink(fs::relative(blob, link.parent_path()), link);
}

std::vector<HubFile> parse_listing(const Json& j, const std::string& what, std::string* commit) {
  if (!j.is_object() || !j.contains("sha") || !j["sha"].is_string() || !j.contains("siblings") || !j["siblings"].is_array())
    throw Error("{}: the answer has no \"sha\" and \"siblings\"", what);
  *commit = j["sha"].get<std::string>();
  if (!is_commit_hash(*commit)) throw Error("{}: \"sha\" is not a commit hash: {}", what, *commit);
  std::vector<HubFile> files;
  for (const Json& s : j["siblings"]) {
    if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) continue;
    HubFile f;
    f.path = s["rfilename"].get<std::string>();
    if (f.path.empty() || f.path.front() == '/' || f.path.find("..") != std::string::npos)
      throw Error("{}: refusing the file name '{}'", what, f.path);
    if (s.contains("size") && s["size"].is_number_integer()) f.size = s["size"].get<int64_t>();
    if (s.contains("blobId") && s["blobId"].is_string()) f.blob_id = s["blobId"].get<std::string>();
    if (s.contains("lfs") && s["lfs"].is_object()) {
      const Json& lfs = s["lfs"];
      if (lfs.contains("sha256") && lfs["sha256"].is_string()) f.sha256 = lower(lfs["sha256"].get<std::string>());
      else if (lfs.contains("oid") && lfs["oid"].is_string()) f.sha256 = lower(lfs["oid"].get<std::string>());
      if (lfs.contains("size") && lfs["size"].is_number_integer()) f.size = lfs["size"].get<int64_t>();
    }
    files.push_back(std::move(f));
  }
  return files;
}

bool default_wanted(const std::string& path, bool has_index) {
  std::string name = path;
  if (path.rfind("drafter/", 0) == 0) name = path.substr(8);
  if (name.find('/') != std::string::npos) return false;
  static const char* kExact[] = {"config.json", "generation_config.json", "chat_template.json", "chat_template.jinja",
                                 "special_tokens_map.json", "vocab.json", "merges.txt", "added_tokens.json"};
  for (const char* e : kExact)
    if (name == e) return true;
  if (name.rfind("tokenizer", 0) == 0) return true;  // tokenizer.json, tokenizer_config.json, tokenizer.model
  if (glob_match("*.safetensors.index.json", name)) return true;
  if (glob_match("*.safetensors", name)) return !(has_index && name.rfind("consolidated", 0) == 0);
  return false;
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& path) {
  // Iterative matcher with one backtrack point for '*' (linear in practice).
  size_t p = 0, s = 0, star = std::string::npos, mark = 0;
  auto class_match = [&](size_t& pi, char c) {
    // pattern[pi] == '['; advances pi past ']' and says whether c is in the class.
    size_t i = pi + 1;
    const bool negate = i < pattern.size() && (pattern[i] == '!' || pattern[i] == '^');
    if (negate) ++i;
    bool hit = false;
    const size_t first = i;
    for (; i < pattern.size() && (pattern[i] != ']' || i == first); ++i) {
      if (i + 2 < pattern.size() && pattern[i + 1] == '-' && pattern[i + 2] != ']') {
        hit |= pattern[i] <= c && c <= pattern[i + 2];
        i += 2;
      } else {
        hit |= pattern[i] == c;
      }
    }
    if (i >= pattern.size()) return pattern[pi] == c;  // no closing ']': a literal '['
    pi = i + 1;
    return hit != negate;
  };
  while (s < path.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = s;
    } else if (p < pattern.size() && pattern[p] == '?') {
      ++p, ++s;
    } else if (p < pattern.size() && pattern[p] == '[') {
      size_t q = p;
      if (class_match(q, path[s])) p = (q == p ? p + 1 : q), ++s;
      else if (star != std::string::npos) p = star + 1, s = ++mark;
      else return false;
    } else if (p < pattern.size() && pattern[p] == path[s]) {
      ++p, ++s;
    } else if (star != std::string::npos) {
      p = star + 1;
      s = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<HubFile> select_files(const std::vector<HubFile>& listing, const std::vector<std::string>& include,
                                  const std::vector<std::string>& exclude) {
  bool has_index = false;
  for (const auto& f : listing) has_index |= glob_match("*.safetensors.index.json", f.path) && f.path.find('/') == std::string::npos;
  std::vector<HubFile> out;
  for (const auto& f : listing) {
    bool wanted = default_wanted(f.path, has_index);
    for (const auto& g : include) wanted |= glob_match(g, f.path);
    for (const auto& g : exclude) wanted &= !glob_match(g, f.path);
    if (wanted) out.push_back(f);
  }
  return out;
}

PullResult pull_model(const RepoRef& ref, const PullOptions& options) {
  const std::string endpoint = [&] {
    std::string e = options.endpoint.empty() ? env_or("HF_ENDPOINT", "https://huggingface.co") : options.endpoint;
    while (!e.empty() && e.back() == '/') e.pop_back();
    return e;
  }();
  const std::string token = options.token.empty() ? default_token() : options.token;
  const std::string cache_dir = options.cache_dir.empty() ? hf_hub_cache_dir() : options.cache_dir;
  Http http(token);
  auto report = [&](const PullProgress& p) {
    if (options.on_progress) options.on_progress(p);
  };

  // 1. The listing: the commit the revision names and its files with sizes and hashes.
  const std::string api_url = fmt::format("{}/api/models/{}/revision/{}?blobs=true", endpoint,
                                          escape_segments(http.handle(), ref.repo_id, true),
                                          escape_segments(http.handle(), ref.revision, false));
  Response listing_response;
  for (int attempt = 0;; ++attempt) {
    listing_response = http.request(api_url, false, true, 0);
    if (listing_response.code == CURLE_OK && listing_response.status == 200) break;
    if (!retryable(listing_response) || attempt >= options.max_retries)
      throw Error("{}", describe_failure(listing_response, fmt::format("{}@{}: listing {}", ref.repo_id, ref.revision, api_url),
                                         endpoint));
    std::this_thread::sleep_for(std::chrono::milliseconds(250 << std::min(attempt, 4)));
  }
  PullResult result;
  result.repo_id = ref.repo_id;
  result.revision = ref.revision;
  const std::vector<HubFile> listing =
      parse_listing(parse_json(listing_response.body, api_url), api_url, &result.commit);
  std::vector<HubFile> files = select_files(listing, options.include, options.exclude);
  if (files.empty())
    throw Error("{}@{}: none of its {} files is one a model needs (config.json, tokenizer, *.safetensors); "
                "give --include GLOB to choose files", ref.repo_id, ref.revision, listing.size());
  // Small files first: config and tokenizer are in place before the long weights download.
  std::stable_sort(files.begin(), files.end(), [](const HubFile& a, const HubFile& b) { return a.size < b.size; });

  const fs::path repo = fs::path(cache_dir) / repo_folder_name(ref.repo_id);
  const fs::path snapshot = repo / "snapshots" / result.commit;
  fs::create_directories(repo / "blobs");
  fs::create_directories(snapshot);
  result.snapshot_dir = snapshot.string();
  result.num_files = static_cast<int>(files.size());
  for (const auto& f : files) result.bytes_total += std::max<int64_t>(f.size, 0);

  PullProgress progress;
  progress.num_files = result.num_files;
  progress.total = result.bytes_total;
  for (size_t i = 0; i < files.size(); ++i) {
    const HubFile& file = files[i];
    const std::string what = fmt::format("{}/{}", ref.repo_id, file.path);
    const std::string url = fmt::format("{}/{}/resolve/{}/{}", endpoint, escape_segments(http.handle(), ref.repo_id, true),
                                        result.commit, escape_segments(http.handle(), file.path, true));
    progress.file = file.path;
    progress.file_index = static_cast<int>(i) + 1;
    progress.file_done = 0;
    progress.file_total = std::max<int64_t>(file.size, 0);

    // 2. The blob's name and size from the file's headers (a 302 for LFS files: not followed).
    Response head;
    for (int attempt = 0;; ++attempt) {
      head = http.request(url, true, false, 0);
      if (head.code == CURLE_OK && head.status < 400) break;
      if (!retryable(head) || attempt >= options.max_retries) throw Error("{}", describe_failure(head, what, endpoint));
      std::this_thread::sleep_for(std::chrono::milliseconds(250 << std::min(attempt, 4)));
    }
    auto header = [&](const char* name) {
      auto it = head.headers.find(name);
      return it == head.headers.end() ? std::string() : it->second;
    };
    if (const std::string commit = header("x-repo-commit"); !commit.empty() && commit != result.commit)
      throw Error("{}: the hub answered for commit {} while listing {}; the revision moved during the pull, run it again",
                  what, commit, result.commit);
    std::string etag = normalize_etag(!header("x-linked-etag").empty() ? header("x-linked-etag") : header("etag"));
    if (etag.empty()) etag = !file.sha256.empty() ? file.sha256 : file.blob_id;
    if (etag.empty() || etag.find('/') != std::string::npos || etag.find("..") != std::string::npos)
      throw Error("{}: the hub gave no usable ETag for it", what);
    int64_t expected_size = file.size;
    if (expected_size < 0 && !header("x-linked-size").empty()) expected_size = std::stoll(header("x-linked-size"));
    if (expected_size < 0 && head.status == 200 && !header("content-length").empty())
      expected_size = std::stoll(header("content-length"));
    if (!file.sha256.empty() && etag != file.sha256)
      throw Error("{}: the hub's ETag {} differs from the listing's sha256 {}", what, etag, file.sha256);

    const fs::path blob = repo / "blobs" / etag;
    const fs::path incomplete = repo / "blobs" / (etag + ".incomplete");
    const fs::path link = snapshot / file.path;
    BlobLock lock(fs::path(cache_dir) / ".locks" / repo_folder_name(ref.repo_id) / (etag + ".lock"));
    std::error_code ec;
    if (fs::is_regular_file(blob, ec) && (expected_size < 0 || static_cast<int64_t>(fs::file_size(blob)) == expected_size)) {
      link_snapshot(blob, link);
      progress.file_done = progress.file_total;
      progress.done += progress.file_total;
      progress.event = PullProgress::Event::Cached;
      report(progress);
      continue;
    }

    // 3. The bytes, into blobs/<etag>.incomplete, resumed from its length after a failure.
    progress.event = PullProgress::Event::Start;
    report(progress);
    const int64_t done_before = progress.done;
    if (!fs::exists(incomplete, ec)) std::ofstream(incomplete, std::ios::binary).flush();  // an empty file is complete at once
    for (int attempt = 0;; ++attempt) {
      int64_t have = fs::exists(incomplete, ec) ? static_cast<int64_t>(fs::file_size(incomplete)) : 0;
      if (expected_size >= 0 && have > expected_size) {  // longer than the file: start over
        fs::remove(incomplete, ec);
        have = 0;
      }
      if (expected_size >= 0 && have == expected_size) break;
      std::FILE* out = std::fopen(incomplete.c_str(), "ab");
      if (!out) throw Error("cannot write {}", incomplete.string());
      int64_t written = have, received = 0;
      auto last_report = std::chrono::steady_clock::now();
      bool write_failed = false;
      auto sink = [&](const char* data, size_t n) {
        if (write_failed || std::fwrite(data, 1, n, out) != n) return false;
        written += static_cast<int64_t>(n);
        received += static_cast<int64_t>(n);
        return true;
      };
      // A server that ignores Range answers 200 with the whole file: start the file over.
      auto on_first_body = [&](long status) {
        if (status == 200 && have > 0) {
          std::fflush(out);
          write_failed = ::ftruncate(::fileno(out), 0) != 0;  // no exception may cross libcurl
          written = 0;
        }
      };
      auto on_tick = [&] {
        const auto now = std::chrono::steady_clock::now();
        if (now - last_report >= std::chrono::milliseconds(200)) {
          last_report = now;
          progress.file_done = written;
          progress.done = done_before + written;
          progress.event = PullProgress::Event::Bytes;
          report(progress);
        }
        return true;
      };
      Response get = http.request(url, false, true, have, sink, on_first_body, on_tick);
      std::fclose(out);
      if (write_failed) throw Error("{}: cannot write {}", what, incomplete.string());
      const bool complete = get.code == CURLE_OK && (get.status == 200 || get.status == 206);
      result.bytes_downloaded += received;
      if (complete) break;
      if (get.status == 416) break;  // the range starts at the end: what we have is the whole file
      if (!retryable(get) || attempt >= options.max_retries) throw Error("{}", describe_failure(get, what, endpoint));
      progress.event = PullProgress::Event::Retry;
      progress.note = get.code != CURLE_OK ? get.curl_error : fmt::format("HTTP {}", get.status);
      progress.file_done = written;
      report(progress);
      std::this_thread::sleep_for(std::chrono::milliseconds(250 << std::min(attempt, 4)));
    }

    // 4. Verified before it enters the cache; a bad file is deleted so the next pull starts clean.
    auto reject = [&](const std::string& why) {
      fs::remove(incomplete, ec);
      throw Error("{}: {}; the download was deleted, nothing of it is in the cache (run the pull again)", what, why);
    };
    const int64_t got = fs::exists(incomplete, ec) ? static_cast<int64_t>(fs::file_size(incomplete)) : 0;
    if (expected_size >= 0 && got != expected_size)
      reject(fmt::format("size mismatch: the hub lists {} bytes, the download has {}", expected_size, got));
    if (!file.sha256.empty()) {
      if (const std::string sha = hash_file(incomplete, false); sha != file.sha256)
        reject(fmt::format("sha256 mismatch: the hub lists {}, the download hashes to {}", file.sha256, sha));
    } else if (is_commit_hash(file.blob_id) && file.blob_id == etag) {
      if (const std::string sha1 = hash_file(incomplete, true); sha1 != file.blob_id)
        reject(fmt::format("git blob sha1 mismatch: the hub lists {}, the download hashes to {}", file.blob_id, sha1));
    }
    fs::rename(incomplete, blob);
    link_snapshot(blob, link);
    ++result.num_downloaded;
    progress.file_done = got;
    progress.done = done_before + progress.file_total;
    progress.event = PullProgress::Event::Done;
    report(progress);
  }

  // 5. The ref last: until every file is in, resolution by revision does not find this snapshot.
  if (ref.revision != result.commit) {
    const fs::path ref_file = repo / "refs" / ref.revision;
    fs::create_directories(ref_file.parent_path());
    std::ofstream(ref_file, std::ios::binary | std::ios::trunc) << result.commit;
  }
  return result;
}

}  // namespace tachyon::io
