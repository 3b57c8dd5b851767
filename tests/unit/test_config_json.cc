#define BOOST_TEST_MODULE test_config_json
#include <boost/test/unit_test.hpp>

#include "llrdma_core.h"

#include <climits>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

namespace
{

llrdma_rank_config_t sample(uint64_t hint)
{
    llrdma_rank_config_t c;
    std::memset(&c, 0, sizeof c); // padding too, so memcmp compares only fields
    c.rank = 3;
    c.size = 16;
    std::snprintf(c.host, sizeof c.host, "node-07.cluster");
    c.pid = 424242;
    c.hint.bytes = hint;
    c.hint.source = LLRDMA_SRC_FILE;
    std::snprintf(c.hint.origin, sizeof c.hint.origin, "file /home/u/.openmpi/mca-params.conf:3");
    std::snprintf(c.hint.text, sizeof c.hint.text, "16K");
    BOOST_TEST_REQUIRE(llrdma_profile_derive(hint, nullptr, &c.profile) == LLRDMA_OK);
    c.ndevices = 1;
    std::snprintf(c.device.name, sizeof c.device.name, "rxe0");
    c.device.port = 1;
    c.device.max_inline_granted_ll = 220;
    c.device.max_inline_granted_bw = 0;
    c.device.sq_depth_granted_ll = 64;
    c.device.sq_depth_granted_bw = 512;
    c.device.cq_moderation_supported = -1;
    c.device.gid_index = 1;
    c.device.rq_depth_granted_ll = 128;
    c.device.rq_depth_granted_bw = 64;
    std::snprintf(c.device.gid_type, sizeof c.device.gid_type, "roce_v2");
    c.device.min_rnr_timer = 12;
    c.device.rnr_retry = 7;
    c.device.retry_count = 6;
    c.device.completion_timeout_ms = -1;
    c.device.rd_atomic_granted = 16;
    c.device.dest_rd_atomic_granted = 8;
    c.device.rdma_limit_granted = 1048576;
    std::snprintf(c.device.gpu_rdma, sizeof c.device.gpu_rdma,
                  "none (the device has no dma-buf MRs)");
    std::snprintf(c.device.progress_ll, sizeof c.device.progress_ll, "poll");
    std::snprintf(c.device.progress_bw, sizeof c.device.progress_bw, "event");
    c.device.cq_mod_count_granted = 16;
    c.device.cq_mod_usec_granted = 8;
    std::snprintf(c.device.progress_note, sizeof c.device.progress_note,
                  "one event per 16 completions or 8 us");
    std::snprintf(c.device.post_api, sizeof c.device.post_api,
                  "ll: ibv_wr_send, bw: ibv_post_send (btl_llrdma_wr_api=0)");
    std::snprintf(c.btl_status, sizeof c.btl_status, "active");
    std::snprintf(c.fork_safe, sizeof c.fork_safe, "kernel");
    c.coll_hint = hint / 2;
    c.coll_algorithm = 3;
    c.coll_segment_knob = 4096;
    c.coll_shm = 1;
    c.coll_shm_chunk_knob = 1 << 20;
    c.coll_shm_lines_max = 512;
    c.coll_shm_share_min = 262144;
    c.coll_shm_share_ranks = 8;
    c.coll_shm_stream_auto = 1;
    c.coll_shm_stream_min = 4194304;
    c.coll_gpu_peer = 1;
    c.coll_gpu_peer_min = 65536;
    c.coll_gpu_stage_auto = 1;
    c.coll_gpu_stage_max = 0;
    c.coll_wait_spin_ns = 10000000;
    c.coll_wait_sleep_ns = 100000000;
    c.coll_wait_oversubscribed = 1;
    std::snprintf(c.coll_wait_why, sizeof c.coll_wait_why, "4 ranks here, 2 online CPUs");
    std::snprintf(c.nic_policy, sizeof c.nic_policy, "nearest");
    std::snprintf(c.nic_near, sizeof c.nic_near, "GPU 0000:1b:00.0");
    c.nnics = 2;
    std::snprintf(c.nics[0].name, sizeof c.nics[0].name, "mlx5_0");
    std::snprintf(c.nics[0].ports, sizeof c.nics[0].ports, "1");
    std::snprintf(c.nics[0].cls, sizeof c.nics[0].cls, "PIX");
    c.nics[0].chosen = 1;
    std::snprintf(c.nics[0].reason, sizeof c.nics[0].reason,
                  "same PCIe switch as GPU 0000:1b:00.0");
    std::snprintf(c.nics[1].name, sizeof c.nics[1].name, "mlx5_4");
    std::snprintf(c.nics[1].cls, sizeof c.nics[1].cls, "SYS");
    std::snprintf(c.nics[1].reason, sizeof c.nics[1].reason,
                  "farther than PIX: across sockets: NUMA node 1, GPU 0000:1b:00.0 on node 0");
    return c;
}

std::string to_json(const llrdma_rank_config_t &c)
{
    std::vector<char> buf(LLRDMA_CONFIG_JSON_MAX);
    BOOST_TEST_REQUIRE(llrdma_config_to_json(&c, buf.data(), buf.size()) == LLRDMA_OK);
    return buf.data();
}

void check_round_trip(const llrdma_rank_config_t &c)
{
    std::string j = to_json(c);
    llrdma_rank_config_t back;
    std::memset(&back, 0, sizeof back);
    BOOST_TEST_REQUIRE(llrdma_config_from_json(j.c_str(), &back) == LLRDMA_OK);
    BOOST_TEST(std::memcmp(&back, &c, sizeof c) == 0);
    BOOST_TEST(to_json(back) == j);
}

} // namespace

BOOST_AUTO_TEST_CASE(key_order_and_shape)
{
    std::string j = to_json(sample(16384));
    BOOST_TEST(j.find('\n') == std::string::npos);
    const char *keys[] = {
        "\"rank\":3",
        "\"size\":16",
        "\"host\":\"node-07.cluster\"",
        "\"pid\":424242",
        "\"size_hint\":16384",
        "\"size_hint_text\":\"16K\"",
        "\"source\":\"file\"",
        "\"origin\":\"file /home/u/.openmpi/mca-params.conf:3\"",
        "\"generic\":false",
        "\"ll\":{\"min_bytes\":1,\"max_bytes\":16384,",
        "\"poll\":\"busy\"",
        "\"bw\":{\"min_bytes\":16385,\"max_bytes\":null,",
        "\"poll\":\"event\"",
        "\"coll_segment_bytes\":16384",
        "\"coll_gpu_peer\":1,\"coll_gpu_peer_min\":65536,\"coll_gpu_stage_auto\":1,"
        "\"coll_gpu_stage_max\":0,\"coll_wait_spin_ns\":10000000,"
        "\"coll_wait_sleep_ns\":100000000,\"coll_wait_oversubscribed\":1,"
        "\"coll_wait_why\":\"4 ranks here, 2 online CPUs\"",
        "\"gpu_rdma_every\":0,\"fork_safe\":\"kernel\",\"btl_status\":\"active\",\"devices\":1,",
        "\"device\":{\"name\":\"rxe0\",\"port\":1,\"max_inline_granted_ll\":220,",
        "\"cq_moderation_supported\":-1,\"gid_index\":1,\"rq_depth_granted_ll\":128,"
        "\"rq_depth_granted_bw\":64,\"gid_type\":\"roce_v2\",\"min_rnr_timer\":12,"
        "\"rnr_retry\":7,\"retry_count\":6,",
        "\"ack_timeout\":0,\"completion_timeout_ms\":-1,",
        "\"rd_atomic_granted\":16,\"dest_rd_atomic_granted\":8,\"rdma_limit_granted\":1048576,"
        "\"gpu_rdma\":\"none (the device has no dma-buf MRs)\",\"progress_ll\":\"poll\","
        "\"progress_bw\":\"event\",\"cq_mod_count_granted\":16,\"cq_mod_usec_granted\":8,"
        "\"progress_note\":\"one event per 16 completions or 8 us\","
        "\"post_api\":\"ll: ibv_wr_send, bw: ibv_post_send (btl_llrdma_wr_api=0)\"}",
        "\"nic_policy\":\"nearest\",\"nic_near\":\"GPU 0000:1b:00.0\",\"nics\":["
        "{\"name\":\"mlx5_0\",\"ports\":\"1\",\"class\":\"PIX\",\"chosen\":true,"
        "\"reason\":\"same PCIe switch as GPU 0000:1b:00.0\"},{\"name\":\"mlx5_4\",\"ports\":\"\","
        "\"class\":\"SYS\",\"chosen\":false,"};
    size_t pos = 0;
    for (const char *k : keys) {
        size_t at = j.find(k, pos);
        BOOST_TEST_CONTEXT(k)
        {
            BOOST_TEST_REQUIRE(at != std::string::npos);
        }
        pos = at + 1;
    }
    BOOST_TEST(j.front() == '{');
    BOOST_TEST(j.substr(j.size() - 3) == "}]}");
    const char *path_fields[] = {"sq_depth",        "rq_depth",
                                 "recv_buf_bytes",  "inline_bytes",
                                 "signal_interval", "cq_mod_count",
                                 "cq_mod_usec",     "eager_limit",
                                 "max_send_size",   "rdma_pipeline_bytes",
                                 "rdma_rd_atomic",  "rdma_frag_bytes"};
    for (const char *f : path_fields)
        BOOST_TEST(j.find(std::string("\"") + f + "\":") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(round_trip_exact)
{
    for (uint64_t hint : {0ull, 1ull, 8192ull, 65536ull, 1ull << 30}) {
        llrdma_rank_config_t c = sample(hint);
        BOOST_TEST_CONTEXT("hint " << hint)
        {
            check_round_trip(c);
        }
    }
    llrdma_rank_config_t c = sample(0);
    c.rank = -1;
    c.size = 0;
    c.pid = -5;
    c.ndevices = 0;
    c.hint.source = LLRDMA_SRC_OTHER;
    c.profile.ll.max_bytes = UINT64_MAX; // null on the wire, UINT64_MAX again
    c.profile.bw.eager_limit = UINT64_MAX - 1;
    c.device.port = -2147483647 - 1;
    c.device.sq_depth_granted_bw = UINT32_MAX;
    c.device.cq_moderation_supported = 1;
    check_round_trip(c);
}

BOOST_AUTO_TEST_CASE(escaping)
{
    llrdma_rank_config_t c = sample(4096);
    std::snprintf(c.host, sizeof c.host, "we\"ird\\host\n\t\x01\x1f\x7f/é");
    std::snprintf(c.btl_status, sizeof c.btl_status, "disqualified: \"no verbs device\"");
    std::string j = to_json(c);
    BOOST_TEST(j.find(R"("host":"we\"ird\\host\u000a\u0009\u0001\u001f\u007f/é")") !=
               std::string::npos);
    BOOST_TEST(j.find(R"("btl_status":"disqualified: \"no verbs device\"")") != std::string::npos);
    for (char ch : j)
        BOOST_TEST(static_cast<unsigned char>(ch) >= 0x20);
    check_round_trip(c);
}

BOOST_AUTO_TEST_CASE(gid_type_and_fork_safe)
{
    // Every value the BTL writes reads back, and dumps of older versions (without the
    // keys) read as unknown.
    for (const char *t : {"roce_v1", "roce_v2", "ib", ""}) {
        llrdma_rank_config_t c = sample(8192);
        std::memset(c.device.gid_type, 0, sizeof c.device.gid_type); // memcmp below
        std::snprintf(c.device.gid_type, sizeof c.device.gid_type, "%s", t);
        BOOST_TEST_CONTEXT(t)
        {
            BOOST_TEST(to_json(c).find(std::string("\"gid_type\":\"") + t + "\"") !=
                       std::string::npos);
            check_round_trip(c);
        }
    }
    for (const char *f : {"kernel", "ibv_fork_init", "off", "", "failed: Invalid argument"}) {
        llrdma_rank_config_t c = sample(0);
        std::memset(c.fork_safe, 0, sizeof c.fork_safe);
        std::snprintf(c.fork_safe, sizeof c.fork_safe, "%s", f);
        BOOST_TEST_CONTEXT(f)
        {
            BOOST_TEST(to_json(c).find(std::string("\"fork_safe\":\"") + f + "\"") !=
                       std::string::npos);
            check_round_trip(c);
        }
    }
    llrdma_rank_config_t c;
    BOOST_TEST_REQUIRE(llrdma_config_from_json(R"({"fork_safe":"off","device":{"gid_type":"ib"}})",
                                               &c) == LLRDMA_OK);
    BOOST_TEST(std::string(c.fork_safe) == "off");
    BOOST_TEST(std::string(c.device.gid_type) == "ib");
    // Too long for the struct, or not a string: the document is refused.
    std::string longtype = "{\"device\":{\"gid_type\":\"" + std::string(12, 'x') + "\"}}";
    BOOST_TEST(llrdma_config_from_json(longtype.c_str(), &c) == LLRDMA_ERR_INVALID);
    std::string longfork = "{\"fork_safe\":\"" + std::string(64, 'x') + "\"}";
    BOOST_TEST(llrdma_config_from_json(longfork.c_str(), &c) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_from_json("{\"fork_safe\":1}", &c) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_from_json("{\"device\":{\"gid_type\":2}}", &c) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(reader_is_tolerant)
{
    // Whitespace, other key order, unknown keys of every type, standard escapes.
    const char *j = R"( {
        "future": {"a": [1, 2.5e3, {"x": null}], "b": true},
        "size_hint": 8192, "rank": 2, "host": "h\u00e9\ud83d\ude00\/x\b\f\r",
        "generic": 0, "ll": {"poll": "busy", "max_bytes": 8192},
        "source": "alias", "extra": -1.5
    } )";
    llrdma_rank_config_t c;
    BOOST_TEST_REQUIRE(llrdma_config_from_json(j, &c) == LLRDMA_OK);
    BOOST_TEST(c.rank == 2);
    BOOST_TEST(c.hint.bytes == 8192u);
    BOOST_TEST(c.profile.hint == 8192u);
    BOOST_TEST(std::string(c.host) == "h\xc3\xa9\xf0\x9f\x98\x80/x\b\f\r");
    BOOST_TEST(c.hint.source == LLRDMA_SRC_ALIAS);
    BOOST_TEST(c.profile.ll.poll == LLRDMA_POLL_BUSY);
    BOOST_TEST(c.profile.ll.max_bytes == 8192u);
    // Missing keys keep "unknown" values.
    BOOST_TEST(c.size == 0);
    BOOST_TEST(c.device.cq_moderation_supported == -1);
    BOOST_TEST(c.device.gid_index == -1);
    BOOST_TEST(std::string(c.device.gid_type).empty());
    BOOST_TEST(std::string(c.fork_safe).empty());
    llrdma_rank_config_t e;
    BOOST_TEST(llrdma_config_from_json("{}", &e) == LLRDMA_OK);
    BOOST_TEST(e.rank == -1);
}

BOOST_AUTO_TEST_CASE(rejects_malformed)
{
    std::string good = to_json(sample(16384));
    // Every strict prefix of a valid document is invalid.
    for (size_t n = 0; n < good.size(); ++n) {
        std::string t = good.substr(0, n);
        llrdma_rank_config_t c = sample(1);
        llrdma_rank_config_t before = c;
        BOOST_TEST_CONTEXT("prefix " << n)
        {
            BOOST_TEST(llrdma_config_from_json(t.c_str(), &c) == LLRDMA_ERR_INVALID);
            BOOST_TEST(std::memcmp(&c, &before, sizeof c) == 0); // untouched
        }
    }
    const char *garbage[] = {
        "",
        "garbage",
        "[1,2]",
        "\"str\"",
        "{\"rank\":}",
        "{\"rank\":1,}",
        "{\"rank\" 1}",
        "{\"rank\":1}}",
        "{\"rank\":1} x",
        "{rank:1}",
        "{\"rank\":01}",
        "{\"rank\":1.5}",
        "{\"nics\":{}}",
        "{\"nics\":[1]}",
        "{\"nics\":[{\"chosen\":1}]}",
        "{\"nics\":[{\"class\":\"much too long\"}]}",
        "{\"rank\":1e2}",
        "{\"rank\":\"3\"}",
        "{\"rank\":99999999999}",
        "{\"size_hint\":-1}",
        "{\"size_hint\":18446744073709551616}",
        "{\"host\":\"a\\x\"}",
        "{\"host\":\"a\\u00\"}",
        "{\"host\":\"a\\u0000b\"}",
        "{\"host\":\"\\udc00\"}",
        "{\"host\":\"\\ud83d\"}",
        "{\"host\":\"tab\there\"}",
        "{\"host\":5}",
        "{\"source\":\"nowhere\"}",
        "{\"ll\":{\"poll\":\"spin\"}}",
        "{\"ll\":{\"sq_depth\":4294967296}}",
        "{\"ll\":5}",
        "{\"device\":{\"port\":\"x\"}}",
        "{\"generic\":2}",
        "{\"a\":tru}",
        "{\"a\":nul}",
        "{\"a\":-}",
    };
    for (const char *g : garbage) {
        llrdma_rank_config_t c;
        BOOST_TEST_CONTEXT(g)
        {
            BOOST_TEST(llrdma_config_from_json(g, &c) == LLRDMA_ERR_INVALID);
        }
    }
    // A host longer than the struct can hold is refused, not silently cut.
    std::string longhost = "{\"host\":\"" + std::string(300, 'h') + "\"}";
    llrdma_rank_config_t c;
    BOOST_TEST(llrdma_config_from_json(longhost.c_str(), &c) == LLRDMA_ERR_INVALID);
    // Deep nesting is refused without exhausting the stack.
    std::string deep = "{\"a\":" + std::string(100000, '[') + std::string(100000, ']') + "}";
    BOOST_TEST(llrdma_config_from_json(deep.c_str(), &c) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_from_json(nullptr, &c) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_from_json("{}", nullptr) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(to_json_buffers)
{
    llrdma_rank_config_t c = sample(8192);
    std::string j = to_json(c);
    std::vector<char> buf(j.size() + 1);
    BOOST_TEST(llrdma_config_to_json(&c, buf.data(), buf.size()) == LLRDMA_OK);
    BOOST_TEST(llrdma_config_to_json(&c, buf.data(), j.size()) == LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(buf[0] == '\0'); // never a partial object
    BOOST_TEST(llrdma_config_to_json(nullptr, buf.data(), buf.size()) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_to_json(&c, nullptr, 10) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_to_json(&c, buf.data(), 0) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(worst_case_fits_json_max)
{
    // Every string full of control characters (6 bytes each when escaped), every number at
    // its longest: must still fit LLRDMA_CONFIG_JSON_MAX.
    llrdma_rank_config_t c;
    std::memset(&c, 0, sizeof c);
    auto fill = [](char *s, size_t cap) {
        std::memset(s, 0x01, cap - 1);
        s[cap - 1] = '\0';
    };
    fill(c.host, sizeof c.host);
    fill(c.hint.origin, sizeof c.hint.origin);
    fill(c.device.gpu_rdma, sizeof c.device.gpu_rdma);
    fill(c.device.progress_ll, sizeof c.device.progress_ll);
    fill(c.device.progress_bw, sizeof c.device.progress_bw);
    fill(c.device.progress_note, sizeof c.device.progress_note);
    fill(c.device.post_api, sizeof c.device.post_api);
    fill(c.hint.text, sizeof c.hint.text);
    fill(c.btl_status, sizeof c.btl_status);
    fill(c.device.name, sizeof c.device.name);
    fill(c.device.gid_type, sizeof c.device.gid_type);
    fill(c.fork_safe, sizeof c.fork_safe);
    fill(c.nic_policy, sizeof c.nic_policy);
    fill(c.nic_near, sizeof c.nic_near);
    c.nnics = LLRDMA_NIC_DUMP_MAX;
    for (llrdma_nic_report_t &n : c.nics) {
        fill(n.name, sizeof n.name);
        fill(n.ports, sizeof n.ports);
        fill(n.cls, sizeof n.cls);
        fill(n.reason, sizeof n.reason);
        n.chosen = 1;
    }
    for (llrdma_path_profile_t *p : {&c.profile.ll, &c.profile.bw}) {
        p->min_bytes = p->max_bytes = p->eager_limit = p->max_send_size = UINT64_MAX - 1;
        p->rdma_pipeline_bytes = p->rdma_frag_bytes = UINT64_MAX - 1;
        p->rdma_rd_atomic = UINT32_MAX;
        p->sq_depth = p->rq_depth = p->recv_buf_bytes = p->inline_bytes = UINT32_MAX;
        p->signal_interval = p->cq_mod_count = p->cq_mod_usec = UINT32_MAX;
    }
    c.device.max_inline_granted_ll = c.device.max_inline_granted_bw = UINT32_MAX;
    c.device.sq_depth_granted_ll = c.device.sq_depth_granted_bw = UINT32_MAX;
    c.device.rq_depth_granted_ll = c.device.rq_depth_granted_bw = UINT32_MAX;
    c.device.min_rnr_timer = c.device.rnr_retry = c.device.retry_count = UINT32_MAX;
    c.device.rd_atomic_granted = c.device.dest_rd_atomic_granted = UINT32_MAX;
    c.device.rdma_limit_granted = UINT64_MAX;
    c.device.gid_index = INT32_MIN;
    c.device.completion_timeout_ms = INT32_MIN;
    c.hint.bytes = c.profile.coll_segment_bytes = UINT64_MAX;
    c.coll_hint = c.coll_segment_knob = c.coll_shm_chunk_knob = c.coll_shm_lines_max =
        c.coll_shm_share_min = c.coll_shm_stream_min = UINT64_MAX;
    c.coll_gpu_peer_min = c.coll_gpu_stage_max = UINT64_MAX;
    c.coll_gpu_peer = 2;
    c.coll_gpu_stage_auto = 1;
    c.coll_algorithm = 64;
    c.coll_shm = 1;
    c.rank = c.size = c.ndevices = c.device.port = c.device.cq_moderation_supported = INT32_MIN;
    c.pid = LONG_MIN;
    c.hint.source = LLRDMA_SRC_OVERRIDE;
    c.profile.ll.poll = c.profile.bw.poll = LLRDMA_POLL_EVENT;
    c.profile.generic = 0;
    c.profile.hint = c.hint.bytes; // not serialised separately: always the effective hint
    check_round_trip(c);
    BOOST_TEST(to_json(c).size() < LLRDMA_CONFIG_JSON_MAX / 2);
}

BOOST_AUTO_TEST_CASE(expand_path)
{
    char buf[128];
    BOOST_TEST(llrdma_expand_path("/tmp/llrdma-%r-%h-%p.json", 3, "n1", 999, buf, sizeof buf) ==
               LLRDMA_OK);
    BOOST_TEST(std::string(buf) == "/tmp/llrdma-3-n1-999.json");
    BOOST_TEST(llrdma_expand_path("100%%/%r%r", -1, nullptr, 0, buf, sizeof buf) == LLRDMA_OK);
    BOOST_TEST(std::string(buf) == "100%/-1-1");
    BOOST_TEST(llrdma_expand_path("%h", 0, nullptr, 0, buf, sizeof buf) == LLRDMA_OK);
    BOOST_TEST(std::string(buf) == "unknown");
    BOOST_TEST(llrdma_expand_path("", 0, "h", 0, buf, sizeof buf) == LLRDMA_OK);
    BOOST_TEST(std::string(buf).empty());
    BOOST_TEST(llrdma_expand_path("a%x", 0, "h", 0, buf, sizeof buf) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_expand_path("a%", 0, "h", 0, buf, sizeof buf) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_expand_path("%R", 0, "h", 0, buf, sizeof buf) == LLRDMA_ERR_INVALID);
    char small[8];
    BOOST_TEST(llrdma_expand_path("/tmp/%r.json", 12, "h", 0, small, sizeof small) ==
               LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(small[0] == '\0');
    BOOST_TEST(llrdma_expand_path("1234567", 0, "h", 0, small, sizeof small) == LLRDMA_OK);
    BOOST_TEST(llrdma_expand_path("12345678", 0, "h", 0, small, sizeof small) ==
               LLRDMA_ERR_TRUNCATED);
    BOOST_TEST(llrdma_expand_path(nullptr, 0, "h", 0, buf, sizeof buf) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_expand_path("x", 0, "h", 0, nullptr, 10) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(integers_above_2_pow_53_are_exact)
{
    // A reader that went through a double would turn 2^53 + 1 into 2^53.
    const uint64_t big[] = {(1ull << 53) + 1, (1ull << 63) + 3, UINT64_MAX - 1};
    for (uint64_t v : big) {
        llrdma_rank_config_t c = sample(16384);
        c.hint.bytes = c.profile.hint = v;
        c.coll_hint = v;
        c.profile.ll.max_bytes = v;
        c.profile.bw.rdma_frag_bytes = v;
        c.device.rdma_limit_granted = v;
        BOOST_TEST_CONTEXT("value " << v)
        {
            std::string j = to_json(c);
            BOOST_TEST(j.find("\"size_hint\":" + std::to_string(v) + ",") != std::string::npos);
            check_round_trip(c); // memcmp: every field bit for bit
        }
    }
    llrdma_rank_config_t c;
    BOOST_TEST_REQUIRE(
        llrdma_config_from_json(
            R"({"size_hint":9007199254740993,"coll_hint":18446744073709551615})", &c) == LLRDMA_OK);
    BOOST_TEST(c.hint.bytes == 9007199254740993ull);
    BOOST_TEST(c.coll_hint == UINT64_MAX);
    BOOST_TEST_REQUIRE(llrdma_config_from_json(R"({"pid":-9223372036854775808})", &c) == LLRDMA_OK);
    BOOST_TEST(c.pid == LONG_MIN);
    BOOST_TEST(llrdma_config_from_json(R"({"pid":-9223372036854775809})", &c) ==
               LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_from_json(R"({"size_hint":9007199254740993.0})", &c) ==
               LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(reader_edge_cases)
{
    llrdma_rank_config_t c;
    // A duplicate key: the last one counts.
    BOOST_TEST_REQUIRE(llrdma_config_from_json(R"({"rank":1,"rank":2})", &c) == LLRDMA_OK);
    BOOST_TEST(c.rank == 2);
    // Nesting up to 32 levels is JSON like any other, deeper is refused.
    std::string ok = "{\"a\":" + std::string(31, '[') + std::string(31, ']') + "}";
    BOOST_TEST(llrdma_config_from_json(ok.c_str(), &c) == LLRDMA_OK);
    std::string deep = "{\"a\":" + std::string(33, '[') + std::string(33, ']') + "}";
    BOOST_TEST(llrdma_config_from_json(deep.c_str(), &c) == LLRDMA_ERR_INVALID);
    // Invalid UTF-8 is not JSON.
    BOOST_TEST(llrdma_config_from_json("{\"host\":\"\xff\"}", &c) == LLRDMA_ERR_INVALID);
    BOOST_TEST(llrdma_config_from_json("{\"host\":\"\xc3\"}", &c) == LLRDMA_ERR_INVALID);
}

BOOST_AUTO_TEST_CASE(cut_utf8_still_reads_back)
{
    // A C field cut in the middle of a multi-byte character (snprintf into a fixed array)
    // holds invalid UTF-8: the writer drops the partial character, so the line stays JSON
    // and fits the same field when read back.
    llrdma_rank_config_t c = sample(4096);
    std::memset(c.host, 'h', sizeof c.host);
    c.host[sizeof c.host - 2] = '\xc3'; // the first byte of "é", its second one cut
    c.host[sizeof c.host - 1] = '\0';
    std::snprintf(c.btl_status, sizeof c.btl_status, "latin-1 \xe9t\xe9");
    std::string j = to_json(c);
    llrdma_rank_config_t back;
    BOOST_TEST_REQUIRE(llrdma_config_from_json(j.c_str(), &back) == LLRDMA_OK);
    BOOST_TEST(std::string(back.host) == std::string(sizeof c.host - 2, 'h'));
    BOOST_TEST(std::string(back.btl_status) == "latin-1 t");
}
